#!/bin/sh
# The "replset-init" sidecar of every MongoDB member. Only member 0 acts: once its mongod
# answers, init-replset.js initiates the replica set and creates the users if they are missing,
# over localhost (MongoDB's localhost exception allows that before any user exists). Then it
# idles, and reports ready. Idempotent: a restart of the pod runs it again and changes nothing;
# a failure exits, and the kubelet restarts the sidecar to try again.
set -eu

# The sidecar's readiness probe looks for this file: member 0 is ready once the set is
# initiated and the users exist, the others at once.
READY=/tmp/replset-init.ready
rm -f "$READY"

idle() {
  touch "$READY"
  trap 'exit 0' TERM INT
  while :; do
    sleep 3600 &
    wait $!
  done
}

case "$POD_NAME" in
  *-0) ;;
  *) idle ;;
esac

until mongosh --quiet --host 127.0.0.1 --eval 'db.adminCommand({ping: 1})' >/dev/null 2>&1; do
  sleep 2
done
mongosh --quiet --host 127.0.0.1 --file /scripts/init-replset.js
idle
