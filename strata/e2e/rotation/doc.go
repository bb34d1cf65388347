// Package rotation holds the certificate rotation test: every role's
// internal mTLS certificate is re-issued over and over while `strata bench`
// load runs through the gateway, and not one request may fail
// (TestRotationUnderLoad; `make rotation` runs it at full size).
package rotation
