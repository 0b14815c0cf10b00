import sys

from hetsched.cli.main import main

sys.exit(main())
