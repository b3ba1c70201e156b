#!/usr/bin/env bash
# Run once while building the sandbox image, as the sandbox user: compiles what every `go test`
# needs (the runtime, testing, fmt and their imports) into the user's build cache. Since Go 1.20
# the standard library ships as source, and a fresh sandbox would otherwise spend some 20 CPU
# seconds compiling it before the first test of every job (measured: 21 s cold, 0.2 s warm).
set -euo pipefail
command -v go >/dev/null || exit 0
module="$(mktemp -d)"
cd "$module"
printf 'module example.invalid/warm\n\ngo 1.21\n' >go.mod
printf 'package warm\n\nimport "fmt"\n\nfunc Hello() string { return fmt.Sprint("hello") }\n' >warm.go
printf 'package warm\n\nimport "testing"\n\nfunc TestHello(t *testing.T) {\n\tif Hello() != "hello" {\n\t\tt.Fatal()\n\t}\n}\n' >warm_test.go
GOFLAGS=-mod=mod GOTOOLCHAIN=local go test ./... >/dev/null
cd /
rm -rf "$module"
