import os
import sys

# oracle.py lives next to the tests
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
