#!/usr/bin/env python3
"""Which echo requests of one `ping` run were answered, from its output:

  pings.py LOG COUNT          requests 1..COUNT must all have been answered
  pings.py LOG --interrupted  ping was stopped by SIGINT: every request it
                              counted as transmitted must have been answered,
                              except the last one (it may have been in
                              flight when ping stopped)

ping's exit status proves little: without -w it is 0 as soon as any reply
came. This counts the replies by icmp_seq instead, and prints what is
missing (and duplicates, which ping marks DUP!).
"""
import re
import sys


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    text = open(sys.argv[1]).read()
    if sys.argv[2] == "--interrupted":
        m = re.search(r"(\d+) packets transmitted", text)
        if not m:
            print("FAIL: no ping summary in", sys.argv[1])
            sys.exit(1)
        sent = int(m.group(1))
        want = set(range(1, sent))  # the last may have been in flight
    else:
        sent = int(sys.argv[2])
        want = set(range(1, sent + 1))
    replies = re.findall(r"icmp_seq=(\d+) ttl=\d+.*", text)
    got = {int(n) for n in replies}
    dups = len(re.findall(r"icmp_seq=\d+ ttl=\d+.*DUP!", text))
    missing = sorted(want - got)
    print("pings: %d sent, %d answered, %d duplicates, missing: %s"
          % (sent, len(got), dups, missing or "none"))
    sys.exit(1 if missing or dups else 0)


if __name__ == "__main__":
    main()
