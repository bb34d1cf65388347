// Package changefeed holds metad's revisioned change feed: the bounded
// in-memory history of watch events the FSM publishes as it applies commands,
// and the subscriptions a Watch server streams from.
//
// Every event carries a revision one higher than the previous one. A
// subscriber resuming from revision R gets the retained events after R; when
// R is 0, older than the history or unknown (e.g. from before a snapshot
// restore), it gets a full snapshot at the current revision instead and then
// the events after it. Publishing never blocks: a subscriber whose buffer is
// full is closed with a retryable error and resumes from the last revision it
// saw.
package changefeed
