#!/bin/bash
# The psgd wheel as a user installs it (docs/PYTHON.md, "Installing"):
# python/wheel/wheel.py packs the built package; a virtual environment made
# from Debian's /usr/bin/python3 with its system packages (numpy, torch)
# pip-installs it offline; `python -m psgd` there says the extension loads
# and names torch; psgd.torch imports; /usr/bin/python3 loads it from a
# pip --target directory, and from its user site after its own pip
# installs it there (and uninstalls it). An interpreter the extension is not
# built for is refused with a message naming the one it needs, and one
# without torch gets a message saying where torch is.
set -euo pipefail
RUNFILES=${TEST_SRCDIR:?run under bazel test}/psgd
tmp=${TEST_TMPDIR:?}
unset PYTHONPATH
fail() { echo "FAIL: $*" >&2; exit 1; }

wheel=$(/usr/bin/python3 "$RUNFILES/python/wheel/wheel.py" \
  "$RUNFILES/python/psgd" "$tmp/dist")
case "$(basename "$wheel")" in
  psgd-*-cp311-cp311-linux_*.whl) ;;
  *) fail "wheel name $(basename "$wheel"): not tagged for CPython 3.11" ;;
esac

/usr/bin/python3 -m venv --system-site-packages "$tmp/v"
"$tmp/v/bin/pip" install --no-index --quiet "$wheel" ||
  fail "pip install $wheel into a venv with the system's packages"
cd "$tmp"
out=$("$tmp/v/bin/python" -m psgd)
echo "$out"
grep -q '^psgd 0\.' <<<"$out" || fail "no version line"
grep -q "^psgd .*($tmp/v/lib/python3.11/site-packages/psgd)" <<<"$out" ||
  fail "psgd is not the installed one"
grep -q "^interpreter: cpython 3.11.* ($tmp/v/bin/python)" <<<"$out" ||
  fail "no interpreter line"
grep -q '^extension: loads' <<<"$out" || fail "the extension does not load"
grep -q '^torch: [0-9]' <<<"$out" || fail "no torch line"
"$tmp/v/bin/python" -c "import psgd.torch, psgd.models" ||
  fail "psgd.torch does not import from the venv"
files=$("$tmp/v/bin/pip" show -f psgd)
grep -q "psgd/_psgd.so" <<<"$files" || fail "pip does not list the extension"

# The system Python itself: the wheel installed by pip into a directory of
# its own (--target, which leaves /usr alone) and put on /usr/bin/python3's
# path.
"$tmp/v/bin/pip" install --no-index --no-deps --quiet --target "$tmp/system" "$wheel" ||
  fail "pip install --target"
sys_out=$(cd "$tmp" && PYTHONPATH=$tmp/system /usr/bin/python3 -m psgd)
grep -q "^psgd .*($tmp/system/psgd)" <<<"$sys_out" || fail "the system Python did not load the wheel's psgd: $sys_out"
grep -q "^interpreter: cpython 3.11.* (/usr/bin/python3)" <<<"$sys_out" || fail "not /usr/bin/python3: $sys_out"
grep -q '^extension: loads' <<<"$sys_out" || fail "the extension does not load under /usr/bin/python3"

# The system Python's own pip (Debian's python3-pip) into its user site,
# which /usr/bin/python3 reads with no PYTHONPATH: Debian marks the system
# Python externally managed (PEP 668), hence --break-system-packages; the
# user base is the test's, so nothing outside it changes.
/usr/bin/python3 -m pip --version > /dev/null 2>&1 ||
  fail "/usr/bin/python3 has no pip: scripts/setup.sh installs python3-pip"
export PYTHONUSERBASE=$tmp/userbase
/usr/bin/python3 -m pip install --user --break-system-packages --no-index --no-deps \
  --quiet --no-warn-script-location "$wheel" || fail "pip install --user into the system Python"
user_out=$(cd "$tmp" && /usr/bin/python3 -m psgd)
echo "$user_out" | head -2
grep -q "^psgd .*($tmp/userbase/lib/python3.11/site-packages/psgd)" <<<"$user_out" ||
  fail "the system Python did not load the user-site psgd: $user_out"
grep -q '^extension: loads' <<<"$user_out" || fail "the user-site extension does not load: $user_out"
grep -q '^torch: [0-9].*psgd.torch usable' <<<"$user_out" || fail "no usable torch for the system Python: $user_out"
/usr/bin/python3 -m pip uninstall --yes --quiet --break-system-packages psgd ||
  fail "pip uninstall from the user site"
[ ! -e "$tmp/userbase/lib/python3.11/site-packages/psgd" ] || fail "pip uninstall left psgd behind"
unset PYTHONUSERBASE

# Built for another interpreter: refused, naming it.
cp -r "$tmp/v/lib/python3.11/site-packages/psgd" "$tmp/other"
mkdir -p "$tmp/elsewhere" && mv "$tmp/other" "$tmp/elsewhere/psgd"
sed -i "s/^PYTHON_VERSION = .*/PYTHON_VERSION = '3.99'/; s|^PYTHON = .*|PYTHON = '/opt/python3.99/bin/python3'|" \
  "$tmp/elsewhere/psgd/_build_info.py"
if err=$(PYTHONPATH=$tmp/elsewhere /usr/bin/python3 -c "import psgd" 2>&1); then
  fail "psgd built for 3.99 imported under 3.11"
fi
echo "$err" | tail -1
grep -q "built for cpython 3.99 (/opt/python3.99/bin/python3); this is cpython 3.11 (/usr/bin/python3)" <<<"$err" ||
  fail "the refusal does not name both interpreters: $err"

# An interpreter without torch (a venv without the system's packages):
# psgd.torch says where torch is.
/usr/bin/python3 -m venv "$tmp/bare"
if err=$(PYTHONPATH=$tmp/v/lib/python3.11/site-packages "$tmp/bare/bin/python" -S -c "
import sys
sys.path = [p for p in sys.path if 'dist-packages' not in p]
import psgd.torch" 2>&1); then
  fail "psgd.torch imported without torch"
fi
echo "$err" | tail -1
grep -q "psgd.torch needs PyTorch, which $tmp/bare/bin/python cannot import\|psgd's extension does not load under $tmp/bare/bin/python" <<<"$err" ||
  fail "no clear error without torch: $err"
echo "PASS"
