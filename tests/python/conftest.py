import os
import sys

# oracle.py lives next to the tests
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# Compiled kernels go to a build-local disk cache, never to the user's ~/.cache/tbex.
os.environ.setdefault("TBEX_CACHE_DIR", os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "build", "test-cache", "python"))
