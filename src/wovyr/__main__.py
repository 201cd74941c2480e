"""`python -m wovyr` is the `wovyr` command."""

import sys

from wovyr.cli.main import main

sys.exit(main())
