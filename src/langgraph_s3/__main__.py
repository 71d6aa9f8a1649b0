import sys

from langgraph_s3.cli import main

sys.exit(main())
