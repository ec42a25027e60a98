# One nats-server with JetStream, of the test's own (on top of
# ../pair/lib.sh, sourced first): started now, stopped with the test's other
# processes; URL is its nats:// address.
command -v nats-server >/dev/null || fail "nats-server is needed"
N=$(free_port)
cat >"$WORK/nats.conf" <<CONF
port: $N
jetstream { store_dir: "$WORK/js" }
CONF
_launch "$WORK/nats.log" nats-server -c "$WORK/nats.conf"
wait_for 10 "nats-server listening" bash -c "exec 3<>/dev/tcp/127.0.0.1/$N"
URL="nats://127.0.0.1:$N"
