#!/usr/bin/env bash
# Installs the Debian packages shardtrace builds against, only those missing.
# Idempotent and quiet when everything is present; uses sudo when not root.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev
      libgraphviz-dev libeigen3-dev catch2 libyaml-cpp-dev libzip-dev
      libkainjow-mustache-dev libbenchmark-dev libopenblas-dev
      patchelf python3-venv chromium)
# patchelf and python3-venv: `make wheel` and the wheel_install test (a fresh venv, pip
# --no-index); chromium: the html_report_chromium test opens the HTML report headless.
# `--sanitizers` (make test-asan / make fuzz): clang and its sanitizer/libFuzzer runtimes too.
[[ "${1:-}" == "--sanitizers" ]] && pkgs+=(clang libclang-rt-14-dev)
# `--mermaid` (make mermaid-check): headless Chromium, where mermaid.js lays the graphs out.
[[ "${1:-}" == "--mermaid" ]] && pkgs=(chromium python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
