// Package pace holds the waits of background loops: Backoff, the capped
// exponential wait between the attempts of a retry loop (with optional
// jitter, so many clients retrying against one peer spread out); Sleep, a
// wait that ends early when the context does; and Every, a loop that runs a
// function on a fixed period until its context ends.
//
// Loops that also wake on other channels (a metadata change, a kick) take
// the next wait from Backoff.Next and select on a timer of it themselves.
package pace
