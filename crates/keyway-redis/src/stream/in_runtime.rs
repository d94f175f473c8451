//! With the `tokio` feature: an async handler whose calls and futures run inside a tokio
//! runtime, so the handler may await that runtime's timers and sockets on the pool's threads.
//! The runtime is entered around each call of the handler, each poll of its future and the
//! future's drop (a tokio timer or socket finds its reactor through the thread's current
//! runtime), and left before the pool thread goes on to other work.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::Handle;

use crate::stream::delivery::{AsyncHandler, HandlerFuture};

/// `handler`, calling it and polling its futures inside `runtime`; `handler` unchanged when
/// there is none.
pub(crate) fn wrap(handler: Box<AsyncHandler>, runtime: Option<Handle>) -> Box<AsyncHandler> {
    let Some(runtime) = runtime else {
        return handler;
    };
    Box::new(move |delivery, payload| {
        let fut = {
            let _entered = runtime.enter();
            handler(delivery, payload)
        };
        Box::pin(InRuntime {
            fut: Some(fut),
            runtime: runtime.clone(),
        })
    })
}

/// A handler's future, polled and dropped with its runtime entered.
struct InRuntime {
    fut: Option<HandlerFuture>,
    runtime: Handle,
}

impl Future for InRuntime {
    type Output = <HandlerFuture as Future>::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let _entered = this.runtime.enter();
        match this.fut.as_mut() {
            Some(fut) => {
                let polled = fut.as_mut().poll(cx);
                if polled.is_ready() {
                    // Dropped here, inside the runtime (a panic in the drop is the caller's
                    // to contain, as one in the poll).
                    this.fut = None;
                }
                polled
            }
            None => Poll::Pending, // polled after completion: never woken again
        }
    }
}

impl Drop for InRuntime {
    fn drop(&mut self) {
        if self.fut.is_some() {
            let _entered = self.runtime.enter();
            self.fut = None;
        }
    }
}
