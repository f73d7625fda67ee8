#!/usr/bin/env bash
# Runs every shell command that README.md and the tutorial show, as a reader would type it, and fails if any
# exits non-zero. Usage: doc_commands.sh PHAZE_BINARY SOURCE_DIR FILE.md...
#   A command is a line of a ```sh block (lines ending in a backslash joined, `# ...` comments dropped).
#   It runs in a scratch folder that looks like the repository root: build/phaze is PHAZE_BINARY, and docs/,
#   tests/ and examples/ are the source tree's, so paths such as docs/examples/my-space.json resolve; what
#   the commands write (runs/, phaze-search/) goes to the scratch folder. Commands run in order, so a
#   `--resume` runs after the search it resumes.
#   Not run: ./scripts/run.sh and ./scripts/test.sh (the set-up commands: test.sh is what runs this test,
#   run.sh builds the program and runs the main job, `phaze search`, which the tutorial shows and this runs).
#   `mpirun` commands run where Open MPI is installed (as root too) and are reported as skipped elsewhere.
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 PHAZE_BINARY SOURCE_DIR FILE.md..." >&2
  exit 2
fi
phaze=$1
src=$2
shift 2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build"
ln -s "$phaze" "$work/build/phaze"
for d in docs tests examples; do ln -s "$src/$d" "$work/$d"; done

# file:line<TAB>command for every command of every ```sh block.
extract() {
  awk -v file="$1" '
    /^```sh[[:space:]]*$/ { inblock = 1; next }
    /^```/ { inblock = 0; next }
    !inblock { next }
    {
      line = $0
      if (cmd == "") start = NR
      if (line ~ /\\[[:space:]]*$/) { sub(/\\[[:space:]]*$/, "", line); cmd = cmd line " "; next }
      cmd = cmd line
      sub(/(^|[[:space:]]+)#.*$/, "", cmd)
      gsub(/[[:space:]]+/, " ", cmd); sub(/^ /, "", cmd); sub(/ $/, "", cmd)
      if (cmd != "") printf "%s:%d\t%s\n", file, start, cmd
      cmd = ""
    }' "$src/$1"
}

ran=0 failed=0 skipped=0
for doc in "$@"; do
  while IFS=$'\t' read -r where cmd; do
    case "$cmd" in
      ./scripts/run.sh* | ./scripts/test.sh*)
        echo "skip  $where  $cmd  (set-up command)"
        skipped=$((skipped + 1))
        continue
        ;;
      mpirun\ *)
        if ! command -v mpirun >/dev/null 2>&1; then
          echo "skip  $where  $cmd  (mpirun not installed: Debian package openmpi-bin)"
          skipped=$((skipped + 1))
          continue
        fi
        ;;
      ./build/phaze*) ;;
      *)
        echo "FAIL  $where  $cmd"
        echo "      not a phaze command this test knows how to run (start it with ./build/phaze)"
        failed=$((failed + 1))
        continue
        ;;
    esac
    start=$(date +%s)
    (cd "$work" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 900 bash -c "$cmd" \
      >"$work/.out" 2>"$work/.err" </dev/null)
    rc=$?
    ran=$((ran + 1))
    if [ $rc -ne 0 ]; then
      echo "FAIL  $where  $cmd"
      echo "      exit status $rc; its last lines of output:"
      tail -n 5 "$work/.err" "$work/.out" | sed 's/^/      /'
      failed=$((failed + 1))
    elif [ ! -s "$work/.out" ]; then
      echo "FAIL  $where  $cmd"
      echo "      printed nothing"
      failed=$((failed + 1))
    else
      echo "ok    $where  $cmd  ($(($(date +%s) - start)) s)"
    fi
  done < <(extract "$doc")
done
echo "$ran commands run, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$ran" -gt 0 ]
