# Sourced by the file-creation benchmarks: a fresh loop volume, made the same way by each.
#
#   make_volume FS IMG MNT [SIZE]     # btrfs, ext4 or xfs; SIZE defaults to 4G
#   remove_work WORK MNT              # unmounts MNT if mounted, removes WORK
#
# The image is sparse (in /dev/shm the disk under it is memory, so what is measured is the file
# system's CPU and locking cost); mkfs defaults, except that ext4 gets inodes for 400,000 files
# and no lazy initialisation (which would otherwise run during the timed part). ext4 keeps its
# journal.
make_volume() {
  local fs=$1 img=$2 mnt=$3 size=${4:-4G}
  rm -f "$img"
  truncate -s "$size" "$img"
  case $fs in
    ext4) mkfs.ext4 -q -N 400000 -E lazy_itable_init=0,lazy_journal_init=0 "$img" ;;
    xfs) mkfs.xfs -q -f "$img" ;;
    btrfs) mkfs.btrfs -q -f "$img" >/dev/null ;;
    *) echo "make_volume: unknown file system $fs (btrfs, ext4 or xfs)" >&2; return 2 ;;
  esac
  mount -o loop "$img" "$mnt"
}

remove_work() {
  mountpoint -q "$2" && umount "$2"
  rm -rf "$1"
}
