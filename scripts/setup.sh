#!/usr/bin/env bash
# Idempotent setup: Debian toolchains (Arm and RISC-V cross gcc, QEMU, clang for fuzzing) and a
# Python venv in .venv with tinyprop installed editable plus TensorFlow for tests and eval, and
# Flower for the fleet (its protobuf pin, 6.33, is one TensorFlow 2.21 takes).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(make gcc g++ libc6-dev gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib
          qemu-system-arm qemu-system-misc
          gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf clang libclang-rt-14-dev clang-format
          python3-venv)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.tinyprop-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup.sh -nt "$stamp" ]; then
  echo "setup: installing Python packages into .venv (first run downloads TensorFlow)"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[tf,dev,boards,fleet]'
  touch "$stamp"
fi
echo "setup: ready (.venv/bin/tinyprop)"
