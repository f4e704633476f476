# Shared helpers of the tinylinux OS definition (sourced, POSIX sh).
#
# Disk 0 gets a FAT filesystem over its first FS_MIB MiB (the whole disk when
# smaller) holding ldlinux.sys/ldlinux.c32 (syslinux), syslinux.cfg, vmlinuz
# and initrd.img.  The hostname is on the kernel command line in syslinux.cfg
# (tinylinux.hostname=NAME).

FS_MIB=64           # FAT filesystem size cap
GUEST_DIR="${0%/*}/guest"

log() { echo "tinylinux: $*" >&2; }
die() { log "error: $*"; exit 1; }

need_tools() {
  for tool in mkfs.fat mcopy syslinux; do
    command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/sbin:/usr/sbin"
    command -v "$tool" >/dev/null 2>&1 \
      || die "$tool not found (install dosfstools, mtools and syslinux)"
  done
  [ -r "$GUEST_DIR/vmlinuz" ] && [ -r "$GUEST_DIR/initrd.img" ] \
    || die "no guest in $GUEST_DIR (run: build --install $GUEST_DIR)"
}

# write_cfg FILE NAME: write syslinux.cfg booting the guest as host NAME
write_cfg() {
  printf 'DEFAULT tinylinux\nPROMPT 0\nTIMEOUT 0\nLABEL tinylinux\n  KERNEL vmlinuz\n  INITRD initrd.img\n  APPEND console=ttyS0,115200 quiet panic=-1 no_timer_check tinylinux.hostname=%s%s\n' \
    "${OSP_HOSTNAME_PREFIX:-}" "$2" > "$1"
}

check_params() {
  case "${OSP_HOSTNAME_PREFIX:-}" in
    *[!A-Za-z0-9.-]*) die "invalid value '${OSP_HOSTNAME_PREFIX}' for parameter hostname_prefix" ;;
  esac
}
