"""`python -m lumos_dagster.cli.wait_ports HOST:PORT… -- COMMAND…`: COMMAND, in this process, once
every address accepts connections. A supervisor starts the Dagster webserver and daemon through it
(deploy_config.py): they load the workspace once, when they start, and would keep a code server that
is still loading its code as an error. It waits as long as it takes: the supervisor stops it."""

import os
import socket
import sys
import time


def main(argv: list[str]) -> None:
    cut = argv.index("--")
    for address in argv[:cut]:
        host, _, port = address.rpartition(":")
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                break
            except OSError:
                time.sleep(0.3)
    os.execvp(argv[cut + 1], argv[cut + 1 :])


if __name__ == "__main__":
    main(sys.argv[1:])
