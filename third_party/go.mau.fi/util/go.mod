module go.mau.fi/util

go 1.25.0

toolchain go1.26.6

require (
	github.com/DATA-DOG/go-sqlmock v1.5.2
	github.com/mattn/go-sqlite3 v1.14.49
	github.com/petermattis/goid v0.0.0-20260816044145-ed329add6b1b
	github.com/rs/zerolog v1.35.1
	github.com/stretchr/testify v1.11.1
	golang.org/x/exp v0.0.0-20260813180055-c1d0aacb2297
	golang.org/x/mod v0.40.0
	golang.org/x/net v0.58.0
	golang.org/x/sys v0.47.0
	golang.org/x/text v0.41.0
	google.golang.org/protobuf v1.36.12
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/rs/xid v1.6.0 // indirect
)
