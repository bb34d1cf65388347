module github.com/strataio/strata/deploy

go 1.26.0
