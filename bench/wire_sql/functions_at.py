#!/usr/bin/env python3
"""bench/wire_sql/functions_at.py REV PREFIX: the transaction wire and its
helpers as they were at git revision REV, renamed public.PREFIX_wire,
PREFIX_ack_apply, ... and calling each other by those names, as SQL on
standard output. Loaded next to the current functions, the two versions can
take turns in one loop (loop.sql's EXECUTE of a function name, or a DO loop
of your own) and be compared on the same machine state:

    bench/wire_sql/functions_at.py 2edcc5d base | psql URL
    SELECT public.base_wire(bundle);   -- the wire of 2edcc5d

Only the functions are copied: they run against today's tables, so REV must
have the same table shapes."""
import re
import subprocess
import sys

NAMES = {'queen.log_transaction_wire_v1': 'wire', 'queen._log_ack_apply_v1': 'ack_apply',
         'queen._log_push_apply_v1': 'push_apply', 'queen._log_ack_check_v1': 'ack_check',
         'queen._log_ack_check_one_v1': 'ack_check_one', 'queen._log_push_check_v1': 'push_check',
         'queen.kv_apply_v1': 'kv_apply'}
# Where the functions live: the files of today, then the numbered ones they
# were split from (a revision holds one set or the other).
FILES = ['sql/log_push.sql', 'sql/log_ack.sql', 'sql/log_transaction_wire.sql', 'sql/kv.sql',
         'sql/003_log_push.sql', 'sql/005_log_ack.sql', 'sql/024_kv.sql']


def main():
    if len(sys.argv) != 3 or not re.fullmatch(r'[a-z_][a-z0-9_]*', sys.argv[2]):
        sys.exit('usage: functions_at.py REV PREFIX (PREFIX: a lower-case SQL identifier)')
    rev, prefix = sys.argv[1], sys.argv[2]
    bodies = []
    for path in FILES:
        shown = subprocess.run(['git', 'show', f'{rev}:{path}'], capture_output=True, text=True)
        if shown.returncode != 0:  # not a file at that revision
            continue
        text = shown.stdout
        for name in NAMES:
            found = re.search(r'CREATE OR REPLACE FUNCTION ' + re.escape(name) + r'\(.*?\n\$\$;\n', text, re.S)
            if found:
                bodies.append(found.group(0))
    sql = '\n'.join(bodies)
    for name, short in NAMES.items():
        sql = sql.replace(name + '(', f'public.{prefix}_{short}(')
    print(sql)


main()
