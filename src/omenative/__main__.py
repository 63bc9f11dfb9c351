import sys

from omenative.cli import main

sys.exit(main())
