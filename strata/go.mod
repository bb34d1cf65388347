module github.com/strataio/strata/strata

go 1.26.0

replace (
	github.com/strataio/strata/libs => ../libs
	github.com/strataio/strata/proto => ../proto
)
