#!/usr/bin/env bash
# Make sure a headless-capable Chromium is at /usr/bin/chromium (used by test/e2e).
# Idempotent: does nothing when it is already installed. Uses only the Debian
# package repositories (apt-get), no browser download from the internet.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
  echo "chromium already present: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "error: $CHROMIUM is missing and installing it needs root (no sudo available)" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium

if [ ! -x "$CHROMIUM" ]; then
  echo "error: apt-get install chromium finished but $CHROMIUM is not there" >&2
  exit 1
fi
echo "chromium installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
