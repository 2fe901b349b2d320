# Sets `fd`, the absolute path of the flightdeck binary a script runs: $FLIGHTDECK_BIN
# when set (CI builds once, then hands the scripts that run side by side one copy that
# no later build replaces), else the one `cargo build --release -p flightdeck` makes.
# Source it from the repository's root.
if [ -n "${FLIGHTDECK_BIN:-}" ]; then
  if [ ! -f "$FLIGHTDECK_BIN" ] || [ ! -x "$FLIGHTDECK_BIN" ]; then
    echo "FLIGHTDECK_BIN=$FLIGHTDECK_BIN: no executable file there" >&2
    exit 1
  fi
  fd=$(cd "$(dirname "$FLIGHTDECK_BIN")" && pwd)/$(basename "$FLIGHTDECK_BIN")
else
  cargo build --release -p flightdeck
  fd=$PWD/target/release/flightdeck
fi
