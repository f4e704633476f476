# Shared helpers of the tinyos OS definition (sourced, POSIX sh).
#
# Image layout written on disk 0 (works on sparse files and block devices,
# never truncates):
#   bytes 0..11     "TINYOS-BOOT" boot code placeholder
#   bytes 510..511  0x55 0xAA      MBR boot signature
#   bytes 1080..81  0x53 0xEF      ext2/3/4 superblock magic (variant default)
#   sector 8 (4096) text marker:   TINYOS v1 / name= / variant= / hostname=
# Nothing is written past the first MiB (IMAGE_BLOCKS): "fill=zero" clears
# that much, and the variant "compact" exports only that much.

MARKER_SEEK=8   # in 512-byte sectors
IMAGE_BLOCKS=16 # the image's area: 16 blocks of 64 KiB, the first MiB

log() { echo "tinyos: $*" >&2; }
die() { log "error: $*"; exit 1; }

check_params() {
  case "${OSP_FILL:-none}" in
    none|zero) ;;
    *) die "invalid value '${OSP_FILL}' for parameter fill (none or zero)" ;;
  esac
  case "${OSP_HOSTNAME_PREFIX:-}" in
    *[!A-Za-z0-9-]*) die "invalid value '${OSP_HOSTNAME_PREFIX}' for parameter hostname_prefix" ;;
  esac
}

# write_at FILE OFFSET: copy stdin to FILE at byte OFFSET without truncating
write_at() {
  dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null || die "cannot write to $1"
}

# write_marker FILE NAME: (re)write the text marker sector
write_marker() {
  # clear the sector first so an old, longer marker leaves no trace
  dd if=/dev/zero of="$1" bs=512 seek="$MARKER_SEEK" count=1 conv=notrunc 2>/dev/null \
    || die "cannot clear marker on $1"
  printf 'TINYOS v1\nname=%s\nvariant=%s\nhostname=%s%s\n' \
    "$2" "${OS_VARIANT:-default}" "${OSP_HOSTNAME_PREFIX:-}" "$2" \
    | write_at "$1" $((MARKER_SEEK * 512))
}

# read_marker FILE: print the marker sector text
read_marker() {
  dd if="$1" bs=512 skip="$MARKER_SEEK" count=1 2>/dev/null | tr -d '\000'
}
