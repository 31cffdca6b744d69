"""Builds torchtpu's C++ libraries with CMake (ninja, ccache when present) into the package."""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup

# The build imports torch for its CMake config; it must not autoload a torchtpu from an earlier
# build (whose compiled part may not match these sources).
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
from setuptools.command.build_ext import build_ext


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        import torch.utils

        # Built in the source tree (what an editable install imports), then copied where setuptools
        # packs the extension when that is elsewhere (a wheel, or an editable build's staging).
        package_dir = os.path.abspath("torchtpu")
        out_dir = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build_dir = os.environ.get("TORCHTPU_BUILD_DIR", os.path.abspath("build"))
        configure = [
            "cmake", "-S", os.path.abspath("."), "-B", build_dir, "-G", "Ninja",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
            f"-DTORCHTPU_OUTPUT_DIR={package_dir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        # Tools installed beside this Python (a venv's ninja or cmake) come first.
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        subprocess.check_call(configure, env=env)
        subprocess.check_call(["cmake", "--build", build_dir], env=env)
        if os.path.realpath(out_dir) != os.path.realpath(package_dir):
            os.makedirs(out_dir, exist_ok=True)
            for name in os.listdir(package_dir):
                if name.endswith(".so"):
                    shutil.copy2(os.path.join(package_dir, name), out_dir)


setup(ext_modules=[Extension("torchtpu._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
