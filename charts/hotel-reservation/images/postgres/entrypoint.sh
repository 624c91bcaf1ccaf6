#!/bin/sh
# Initialise the data directory once (user, password and databases from env, like the official
# image: changing POSTGRES_PASSWORD later does not change the stored one), then run the server.
set -eu
: "${POSTGRES_USER:?POSTGRES_USER must be set}" "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA"
    chown -R postgres:postgres "$(dirname "$PGDATA")"
    chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256
    rm -f "$pwfile"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/tmp" -w start
    for db in ${POSTGRES_DATABASES:-}; do
        psql -h /tmp -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$db\""
    done
    pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp \
    -c max_connections="${POSTGRES_MAX_CONNECTIONS:-100}" -c shared_buffers="${POSTGRES_SHARED_BUFFERS:-32MB}" \
    -c log_connections=on -c log_min_error_statement=error "$@"
