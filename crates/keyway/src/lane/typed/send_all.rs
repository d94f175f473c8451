//! `TypedLane::send_all`: a run of messages for one pinned typed lane, admitted with one count
//! and appended under one lane lock (the closure batches of `execute_all` are `lane/batch.rs`).

use std::sync::Arc;

use super::{Entry as TypedEntry, Typed};
use crate::engine::{refused, Refusal, Registry};
use crate::error::SubmitError;
use crate::lane::batch::BATCH_RUN;
use crate::lane::table::{LaneCore, LaneTable};

/// `TypedLane::send_all`: every message of `msgs` queued in the pinned typed lane `lane`, in
/// order, admitted with one count per run of up to [`BATCH_RUN`] messages and appended under one
/// lane lock per run with at most one schedule. Messages are kept in place in their entries (no
/// allocation per message): a run costs its one gathering buffer. With `whole`, all or none (as
/// [`push_all`](crate::lane::batch::push_all)). Refused, the messages not admitted come back, in
/// order.
pub(crate) fn send_all_pinned<K, M, S, I>(
    registry: &Arc<Registry>,
    table: &Arc<LaneTable<Typed<K, M, S>>>,
    lane: &Arc<LaneCore<Typed<K, M, S>>>,
    msgs: I,
    whole: bool,
) -> Result<(), SubmitError<Vec<M>>>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
    I: IntoIterator<Item = M>,
{
    let mut msgs = msgs.into_iter();
    let run = if whole { usize::MAX } else { BATCH_RUN };
    let message = TypedEntry::Message;
    loop {
        let mut entries: Vec<TypedEntry<M>> = Vec::with_capacity(msgs.size_hint().0.min(run));
        entries.extend(msgs.by_ref().take(run).map(message));
        let more = entries.len() == run;
        let taken = match registry.admit_many(entries.len(), whole) {
            Ok(taken) => taken,
            Err(why) => {
                let mut back: Vec<M> = entries.into_iter().map(message_of).collect();
                back.extend(msgs);
                return Err(refused(why, back));
            }
        };
        let tail = entries.split_off(taken);
        lane.push_all(table, registry, &mut entries);
        if !tail.is_empty() {
            let mut back: Vec<M> = tail.into_iter().map(message_of).collect();
            back.extend(msgs);
            return Err(refused(Refusal::Full, back));
        }
        if !more {
            return Ok(());
        }
    }
}

/// The message of an entry made by [`send_all_pinned`].
fn message_of<M>(entry: TypedEntry<M>) -> M {
    match entry.into_message() {
        Ok(msg) => msg,
        Err(_) => unreachable!("a batch holds messages only"),
    }
}
