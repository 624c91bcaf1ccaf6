#!/bin/sh
# nginx looks up a proxy_pass host once, when it loads its config, unless the host is a variable
# and it has a resolver: then it asks that resolver again once an answer is older than `valid`.
# A pod is told its cluster's DNS server in /etc/resolv.conf (kube-dns's ClusterIP on any
# cluster): write it as nginx's resolver for a config to `include /tmp/nginx-resolver.conf;`, so a
# Service re-created with a new ClusterIP is followed without restarting nginx.
set -eu
server=
while read -r key value _ || [ -n "${key:-}" ]; do
    if [ "$key" = nameserver ]; then server=$value; break; fi
done < /etc/resolv.conf
if [ -z "$server" ]; then
    echo "nginx-entrypoint: no nameserver in /etc/resolv.conf: nginx could not look up its upstreams" >&2
    exit 1
fi
case $server in
    *:*) echo "resolver [$server] valid=5s;" ;;
    *) echo "resolver $server valid=5s ipv6=off;" ;;  # an IPv4 cluster answers no AAAA worth asking
esac > /tmp/nginx-resolver.conf
exec nginx -g 'daemon off;' "$@"
