"""Wrong: exits 0 having done nothing. An empty log must not pass for a clean one."""

import sys

if __name__ == "__main__":
    sys.exit(0)
