# Sourced by check_newest.sh and check_floors.sh: a copy of the checkout (a clone, with
# the tracked files and the untracked ones git does not ignore as they are in the working
# tree) in $work/tree, with a new .venv beside its files, so that the checks there use
# that environment and not the checkout's.
# Needs: $root (the checkout), $work (an empty or new folder).
# A clone (so the tree has the history some tests read, and ruff its .gitignore), with
# the working tree's files, committed or not, laid over it.
mkdir -p "$work"
git clone -q --shared --no-checkout "$root" "$work/tree"
git -C "$work/tree" reset -q
# The copy has no ../shared beside it: point the tests at the checkout's (they would
# skip without it), unless the caller set the paths.
export PROBEWISE_FIXTURES=${PROBEWISE_FIXTURES:-$root/../shared/fixtures}
export PROBEWISE_RESPONSES=${PROBEWISE_RESPONSES:-$root/../shared/data/responses}
export PROBEWISE_REQUIRE_FIXTURES=${PROBEWISE_REQUIRE_FIXTURES:-1}
(cd "$root" && git ls-files -co --exclude-standard -z) |
    (cd "$root" && tar --null -T - -cf -) | tar -xf - -C "$work/tree"
python3 -m venv "$work/tree/.venv"
vpip=("$work/tree/.venv/bin/python" -m pip --disable-pip-version-check -q)
"${vpip[@]}" install --upgrade "pip>=25.1"
# name==version of every package in the venv (pip's -q would silence the list)
venv_list() {
    "$work/tree/.venv/bin/python" -m pip --disable-pip-version-check list --format=freeze \
        --exclude-editable
}
# the lock's name==version pins, without hashes or comments
lock_pins() {
    grep -E '^[A-Za-z0-9]' "$root/requirements/dev.lock" | sed 's/ .*//'
}
# name==version of what the venv holds now (probewise itself and pip left out)
venv_pins() {
    venv_list | grep -vE '^(probewise|pip)==' || true
}
# the packages whose version differs between two name==version lists (files)
changed_names() {
    python3 - "$1" "$2" <<'PY'
import re, sys
def read(path):
    out = {}
    for line in open(path):
        name, _, version = line.strip().partition("==")
        if version:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
for name in sorted(set(a) | set(b)):
    if a.get(name) != b.get(name):
        print(f"{name} {a.get(name, '-')} {b.get(name, '-')}")
PY
}
