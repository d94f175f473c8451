//! `pool_batches`' typed lanes: one with a sync handler, one with an async handler, made at
//! their first use; `TypedLane::send_all` / `send_all_or_none` and `TypedLanes::send` /
//! `send_coalescing` of messages carrying a [`Token`].

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};

use keyway::{Pool, TypedLanes};

use crate::batches::{Batches, Call, Env};
use crate::closures::spin;
use crate::input::{Handler, MsgBody, Pattern};
use crate::witness::{Bomb, PanicAt, Token};

/// A typed lane's message.
pub struct Msg {
    t: Token,
    body: MsgBody,
    bomb: Bomb,
}

impl Batches {
    /// The typed lanes of `handler`, made at their first use.
    fn lanes(&mut self, pool: &Pool, handler: Handler) -> TypedLanes<u8, Msg> {
        let lanes = match handler {
            Handler::Sync => &mut self.sync_lanes,
            Handler::Async => &mut self.async_lanes,
        };
        lanes
            .get_or_insert_with(|| match handler {
                Handler::Sync => pool.typed_lanes(handle),
                Handler::Async => pool.typed_lanes_async(handle_async),
            })
            .clone()
    }

    pub(crate) fn send_all(
        &mut self,
        env: &Env<'_>,
        handler: Handler,
        key: u8,
        call: &Call,
        pattern: Pattern<MsgBody>,
    ) {
        let lanes = self.lanes(env.pool, handler);
        let code = typed_code(handler, key);
        let first = self.witness.made();
        let mut msgs = Vec::with_capacity(call.n);
        for i in 0..call.n {
            let (body, bomb) = pattern.of(i, MsgBody::Quick);
            let (t, _) = self.witness.token(code);
            let bomb = Bomb(bomb);
            msgs.push(Msg { t, body, bomb });
        }
        let lane = lanes.lane(key);
        let (it, fired) = PanicAt::new(msgs.into_iter(), call.at);
        let answer = catch_unwind(AssertUnwindSafe(|| {
            if call.whole {
                lane.send_all_or_none(it)
            } else {
                lane.send_all(it)
            }
        }))
        .map_err(drop);
        let unwound = call.unwound(fired.get());
        self.witness.settle(
            answer,
            first,
            call.n,
            unwound,
            false,
            env.bounded,
            call.whole,
        );
    }

    pub(crate) fn send(
        &mut self,
        env: &Env<'_>,
        handler: Handler,
        key: u8,
        coalescing: bool,
        body: MsgBody,
        bomb: bool,
    ) {
        let lanes = self.lanes(env.pool, handler);
        let (t, i) = self.witness.token(typed_code(handler, key));
        let msg = Msg {
            t,
            body,
            bomb: Bomb(bomb),
        };
        let answer = catch_unwind(AssertUnwindSafe(|| {
            if coalescing {
                lanes.send_coalescing(key, msg)
            } else {
                lanes.send(key, msg)
            }
        }));
        let answer = answer.unwrap_or_else(|_| panic!("TypedLanes::send unwound"));
        self.settle_one(answer, i, coalescing, false, env.bounded);
    }
}

/// A typed lane's number in the log.
fn typed_code(handler: Handler, key: u8) -> u8 {
    match handler {
        Handler::Sync => 16 + key,
        Handler::Async => 24 + key,
    }
}

/// The sync handler.
fn handle(_: &u8, m: Msg) {
    let Msg { t, body, bomb } = m;
    let _bomb = bomb;
    t.start();
    match body {
        MsgBody::Panic | MsgBody::PanicInHandler => panic!("fuzz: handler panics"),
        MsgBody::Spin(n) => spin(n),
        MsgBody::Quick | MsgBody::Yield(_) => {}
    }
}

/// The async handler.
fn handle_async(_: &u8, m: Msg) -> impl Future<Output = ()> + Send + 'static {
    let Msg { t, body, bomb } = m;
    t.start();
    if let MsgBody::PanicInHandler = body {
        panic!("fuzz: async handler panics");
    }
    async move {
        let (_bomb, _t) = (bomb, t);
        match body {
            MsgBody::Panic => panic!("fuzz: handler's future panics"),
            MsgBody::Spin(n) => spin(n),
            MsgBody::Yield(n) => {
                for _ in 0..=n % 3 {
                    keyway::yield_now().await;
                }
            }
            MsgBody::Quick | MsgBody::PanicInHandler => {}
        }
    }
}
