//! What an async typed lane's driver holds in its turn: its lane, and the messages it took from
//! the lane together and has not started (`asynchronous.rs`).

use std::cell::RefCell;
use std::sync::Arc;

use super::{Entry, Typed};
use crate::engine::OnPool;
use crate::lane::activation::Handover;
use crate::lane::queue::Queue;
use crate::lane::table::{LaneCore, LaneState};
use crate::lane::turn::{Holds, Turn};

/// How an async typed lane is handed on when its driver is done with it.
pub(super) type TypedHandover<K, M, S> = Handover<Typed<K, M, S>>;

/// A typed driver's turn: it holds the driver's lane and the messages taken from it.
pub(super) type DriverTurn<'a, 'b, K, M, S> = Turn<'a, Taken<'b, K, M, S>>;

/// Where a driver's taken messages wait: oldest first, empty between two turns (its blocks kept
/// for the lane's next take).
pub(super) type Chunk<M> = RefCell<Queue<Entry<M>>>;

/// A driver's lane, and the messages its turn took from the lane's head under one lock and has
/// not started (`chunk`). The turn holds it: a `shutdown_now` called from one of its futures
/// puts those messages back in front of the lane. Both are lent by the driver (or, for its
/// first poll, by the runner that launched it: no reference taken on the lane).
pub(super) struct Taken<'a, K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    pub(super) lane: &'a Arc<LaneCore<Typed<K, M, S>>>,
    pub(super) chunk: &'a Chunk<M>,
}

impl<K, M, S> Clone for Taken<'_, K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, M, S> Copy for Taken<'_, K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
}

impl<K, M, S> Taken<'_, K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// Rule 7: the lane's current future is done; the next message, or how the lane is handed
    /// on (a flush next: back to a runner). The turn's messages taken come first; once they are
    /// all started, the lane's head is popped under the lane lock, or with `max` above one the
    /// lane's messages are taken as a runner takes its chunk (rule 5: at most `max` of them, or
    /// the whole blocks that hold them; a coalescing message last in the queue stays there,
    /// where a push may still replace it, unless it is the very next to run). An empty queue
    /// turns the lane idle, the key's state the driver `carried` put back in its slot first,
    /// under the same hold of the lane lock: before a new activation can look for it there. The
    /// lane is let go of (rule 3) under that hold too, if its shard's lock is free.
    pub(super) fn next_message(
        &self,
        carried: &mut Option<S>,
        max: usize,
    ) -> Result<M, TypedHandover<K, M, S>> {
        let mut chunk = self.chunk.borrow_mut();
        let taken = !chunk.is_empty();
        if taken {
            match chunk.pop_front().map(Entry::into_message) {
                Some(Ok(msg)) => return Ok(msg),
                Some(Err(flush)) => {
                    chunk.push_front(flush);
                    self.lane.state.lock().give_back(&mut chunk);
                    return Err(Handover::Other);
                }
                None => {}
            }
        }
        let mut guard = self.lane.state.lock();
        let st = &mut *guard;
        if taken || max > 1 {
            st.queue.reclaim(&mut chunk);
        }
        if st.table.is_none() {
            return Err(Handover::Drained);
        }
        match st.queue.front() {
            None => return Err(self.turn_idle(guard, carried)),
            Some(Entry::Flush(_)) => return Err(Handover::Other),
            Some(_) if max <= 1 => {
                return match st.queue.pop_front().map(Entry::into_message) {
                    Some(Ok(msg)) => Ok(msg),
                    _ => unreachable!("the head was just seen to be a message"),
                };
            }
            Some(_) => {}
        }
        st.take_batch(&mut chunk, max);
        match chunk.pop_front().map(Entry::into_message) {
            Some(Ok(msg)) => Ok(msg),
            _ => unreachable!("the head was just seen to be a message"),
        }
    }

    /// The lane's queue is empty (`guard`: its lock, held): the state the driver `carried` goes
    /// back to the key's slot and the lane turns idle under this hold, and is let go of (rule 3)
    /// under it too if its shard's lock is free: no second hold.
    fn turn_idle(
        &self,
        mut guard: LaneGuard<'_, K, M, S>,
        carried: &mut Option<S>,
    ) -> TypedHandover<K, M, S> {
        let st = &mut *guard;
        let displaced = carried.take().map(|state| {
            let keyed = Typed::<K, M, S>::keyed(self.lane.key.get());
            keyed.place_state(self.lane.kind.key_state(), state)
        });
        let mut table = st.turn_idle(self.lane.pinned());
        let released = table
            .as_ref()
            .is_some_and(|t| self.lane.release_held(st, t));
        drop(guard);
        // A state a handed-back message made meanwhile, dropped with no lock held; and the
        // table's reference once released (it may be the last).
        if let Some(displaced) = displaced {
            displaced.drop_contained();
        }
        if released {
            drop(table.take());
        }
        Handover::Idle(table)
    }
}

/// A typed lane's lock, held.
type LaneGuard<'a, K, M, S> = parking_lot::MutexGuard<'a, LaneState<Typed<K, M, S>>>;

impl<K, M, S> Holds for Taken<'_, K, M, S>
where
    K: Send + Sync + 'static,
    M: Send + 'static,
    S: Send + 'static,
{
    /// The messages taken and not started go back in front of the lane, in order (rule 5).
    #[inline]
    fn put_back(&self) {
        let mut chunk = self.chunk.borrow_mut();
        if !chunk.is_empty() {
            self.lane.state.lock().give_back(&mut chunk);
        }
    }

    /// As the closure lane's driver: a driver whose poll unwound is dropped, cancelled.
    fn unwound(&self, _pool: &OnPool<'_>) {}
}
