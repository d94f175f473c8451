//! `OrderedMap::finish` returns the sink once every item is through it; `with_max_in_flight`
//! bounds the items in flight under many producers.

use crate::common;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use common::{spin, Latch};
use keyway::{OrderedMap, Pool};

#[test]
fn finish_returns_the_sink_after_every_output() {
    let pool = Pool::builder().core_threads(3).build().unwrap();
    for seed in 0..20u64 {
        let (tx, rx) = mpsc::channel();
        let map = OrderedMap::new(
            4,
            move |n: u64| {
                spin(((n * 7919 + seed) % 97) as u32 * 50);
                n
            },
            move |n| tx.send(n).unwrap(),
        )
        .unwrap();
        for n in 0..500 {
            map.submit(n, |task| pool.execute(task).unwrap());
        }
        let sink = map.finish();
        // Everything is through: the outputs are all there before the sink is even dropped.
        let got: Vec<u64> = rx.try_iter().collect();
        assert_eq!(got, (0..500).collect::<Vec<_>>(), "seed {seed}");
        drop(sink);
    }
}

#[test]
fn finish_with_nothing_dropped_and_panicking_items() {
    let empty = OrderedMap::new(1, |x: u8| x, |_: u8| {}).unwrap();
    let _sink = empty.finish(); // no item: returns at once

    let out = Arc::new(Mutex::new(Vec::new()));
    let o = out.clone();
    let map = OrderedMap::new(
        2,
        |x: u32| if x == 3 { panic!("item 3") } else { x },
        move |x| o.lock().unwrap().push(x),
    )
    .unwrap();
    let tasks: Vec<_> = (0..6).map(|i| map.task(i)).collect();
    let mut threads = Vec::new();
    for (i, t) in tasks.into_iter().enumerate().rev() {
        if i == 4 {
            drop(t); // dropped unrun: skipped
        } else {
            threads.push(std::thread::spawn(t));
        }
    }
    let _sink = map.finish();
    assert_eq!(*out.lock().unwrap(), [0, 1, 2, 5]);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn in_flight_bound_holds_under_many_producers() {
    for max in [1usize, 2, 3, 4] {
        let pool = Pool::builder()
            .core_threads(4)
            .max_threads(8)
            .build()
            .unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (i2, m2) = (inside.clone(), most.clone());
        let sunk = Arc::new(AtomicUsize::new(0));
        let s2 = sunk.clone();
        let map = Arc::new(
            OrderedMap::new(
                8,
                move |x: usize| {
                    let n = i2.fetch_add(1, Ordering::SeqCst) + 1;
                    m2.fetch_max(n, Ordering::SeqCst);
                    spin((x % 13) as u32 * 100);
                    i2.fetch_sub(1, Ordering::SeqCst);
                    x
                },
                move |_x| {
                    s2.fetch_add(1, Ordering::SeqCst);
                },
            )
            .unwrap()
            .with_max_in_flight(NonZeroUsize::new(max).unwrap()),
        );
        let start = Latch::new(1);
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let (map, pool, start) = (map.clone(), pool.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..200 {
                        map.submit(p * 1000 + i, |task| pool.execute(task).unwrap());
                        assert!(map.in_flight() <= max);
                    }
                })
            })
            .collect();
        start.count_down();
        for p in producers {
            p.join().unwrap();
        }
        let map = Arc::try_unwrap(map).unwrap();
        let _sink = map.finish();
        assert_eq!(sunk.load(Ordering::SeqCst), 800);
        let most = most.load(Ordering::SeqCst);
        assert!(most <= max, "{most} items processed at once, bound {max}");
        pool.shutdown();
    }
}

#[test]
fn in_flight_bound_of_usize_max_is_unbounded() {
    let map = OrderedMap::new(4, |x: u32| x, |_: u32| {})
        .unwrap()
        .with_max_in_flight(NonZeroUsize::new(usize::MAX).unwrap());
    let tasks: Vec<_> = (0..1000).map(|i| map.task(i)).collect();
    assert_eq!(map.in_flight(), 1000);
    for t in tasks.into_iter().rev() {
        t();
    }
    assert_eq!(map.in_flight(), 0);
    let _ = map.finish();
}
