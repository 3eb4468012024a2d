module github.com/redlock-go/redlock/internal/wasirun

go 1.26.0

toolchain go1.26.8

require github.com/tetratelabs/wazero v1.12.0

require golang.org/x/sys v0.44.0 // indirect
