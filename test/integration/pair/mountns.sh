# Sourced first by the scenarios that mount (a small tmpfs, a read-only bind mount): runs the script again in a
# mount namespace of its own, so that nothing it mounts outlives it or is seen outside. As root, or as a user
# where unprivileged user namespaces are allowed (unshare -r).
if [ "${PAIR_MOUNT_NS:-}" != 1 ]; then
  if [ "$(id -u)" = 0 ]; then ns=(-m); else ns=(-r -m); fi
  PAIR_MOUNT_NS=1 exec unshare "${ns[@]}" --propagation private bash "$0" "$@"
fi
# mount_tmpfs DIR MiB: a tmpfs of that size at DIR (created)
mount_tmpfs() { mkdir -p "$1" && mount -t tmpfs -o "size=$2m" tmpfs "$1" || fail "cannot mount a tmpfs at $1"; }
# fill_disk DIR LEAVE_BYTES: a file on DIR's filesystem that leaves about LEAVE_BYTES free
fill_disk() {
  local avail; avail=$(df -B1 --output=avail "$1" | tail -1)
  [ "$avail" -gt "$2" ] || fail "only $avail bytes free on $1"
  fallocate -l $((avail - $2)) "$1/fill" || fail "fallocate on $1 failed"
}
