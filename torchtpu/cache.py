"""python -m torchtpu.cache stats|clear|prune: the on-disk compile cache (see _compile_cache)."""

import sys

from ._compile_cache import main

if __name__ == "__main__":
    sys.exit(main())
