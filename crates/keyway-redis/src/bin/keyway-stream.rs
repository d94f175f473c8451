//! `keyway-stream`: look at and act on a keyway stream consumer group from a shell.
//!
//! ```text
//! keyway-stream --url redis://127.0.0.1:6379 --topic orders --shards 8 inspect
//! keyway-stream ... members
//! keyway-stream ... dead-letters list [--shard N] [--limit N]
//! keyway-stream ... dead-letters show --shard N ID
//! keyway-stream ... dead-letters replay --shard N (ID... | --all) [--dry-run]
//! keyway-stream ... dead-letters purge --shard N (ID... | --all) [--dry-run]
//! keyway-stream ... cleanup [--dry-run]
//! ```
//!
//! Tables for people by default; `--json` prints one JSON document for scripts. Exit status 0
//! on success, 1 on an error (printed on stderr), 2 on bad arguments.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use keyway_redis::admin::{Admin, DeadLetter, GroupReport, MembersReport};
use keyway_redis::stream::Topic;
use serde_json::{json, Value};

/// Look at and act on a keyway stream consumer group.
#[derive(Parser)]
#[command(name = "keyway-stream", version)]
struct Cli {
    /// The Redis URL.
    #[arg(
        long,
        env = "KEYWAY_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    url: String,
    /// The topic's name.
    #[arg(long)]
    topic: String,
    /// The topic's shard count.
    #[arg(long)]
    shards: u32,
    /// The topic's namespace.
    #[arg(long, default_value = "keyway")]
    namespace: String,
    /// The consumer group.
    #[arg(long, default_value = "keyway")]
    group: String,
    /// The consumers' lease (a member silent this long is not alive): `10s`, `500ms`, or ms.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    lease: Duration,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Per shard: owner, epoch, lease left, lag, pending, oldest pending, dead letters,
    /// quarantined keys; and the members alive.
    Inspect,
    /// Live members, and consumers with pending entries and no live member.
    Members,
    /// Release a quarantined key: its held entries run again, in order, the one that
    /// exhausted its attempts first (after fixing what made it fail).
    Release {
        /// The key, as the producer sent it.
        key: String,
        /// Say whether it is quarantined, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The dead letters.
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(Dead),
    /// Deletes consumers that are no live member and have no pending entries (never one
    /// with pending entries).
    Cleanup {
        /// Say what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum Dead {
    /// List dead letters, oldest first.
    List {
        /// Only this shard.
        #[arg(long)]
        shard: Option<u32>,
        /// At most this many per shard.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// One dead letter, with its payload.
    Show {
        #[arg(long)]
        shard: u32,
        /// Its id in the dead letters.
        id: String,
    },
    /// Put dead letters back at the end of their shard (after fixing what made them fail).
    Replay(Pick),
    /// Delete dead letters.
    Purge(Pick),
}

#[derive(Args)]
struct Pick {
    #[arg(long)]
    shard: u32,
    /// Dead-letter ids; none with --all.
    ids: Vec<String>,
    /// Every dead letter of the shard.
    #[arg(long, conflicts_with = "ids")]
    all: bool,
    /// Say what would be done, change nothing.
    #[arg(long)]
    dry_run: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (n, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, "ms"),
    };
    let n: u64 = n.parse().map_err(|_| format!("not a duration: {s:?}"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => n
            .checked_mul(60)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("too long: {s:?}")),
        _ => Err(format!("unknown unit in {s:?} (ms, s or m)")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keyway-stream: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let topic = Topic::new(&cli.topic, cli.shards)?.namespace(&cli.namespace);
    let mut admin = Admin::connect(&cli.url, topic, &cli.group)?.lease(cli.lease);
    let (doc, table) = match &cli.command {
        Command::Inspect => inspect(admin.inspect()?),
        Command::Members => members(admin.members()?),
        Command::Release { key, dry_run } => {
            let shard = keyway_redis::stream::shard_of(key.as_bytes(), cli.shards);
            let released = if *dry_run {
                admin.quarantined(key.as_bytes())?.is_some()
            } else {
                admin.release(key.as_bytes())?
            };
            let t = match (released, dry_run) {
                (true, false) => format!("released {key} (shard {shard})\n"),
                (true, true) => format!("would release {key} (shard {shard})\n"),
                (false, _) => format!("{key} (shard {shard}) is not quarantined\n"),
            };
            let doc = json!({"key": key, "shard": shard, "released": released, "dry_run": dry_run});
            (doc, t)
        }
        Command::DeadLetters(Dead::List { shard, limit }) => {
            let list = admin.dead_letters(*shard, *limit)?;
            let doc = Value::Array(list.iter().map(dead_json).collect());
            let mut t = String::from(
                "SHARD  ID                 ORIGINAL           ATTEMPTS  KEY              REASON\n",
            );
            for d in &list {
                t += &format!(
                    "{:<6} {:<18} {:<18} {:<9} {:<16} {}\n",
                    d.shard,
                    d.id,
                    d.original_id,
                    d.attempts,
                    String::from_utf8_lossy(&d.key),
                    d.reason
                );
            }
            (doc, t)
        }
        Command::DeadLetters(Dead::Show { shard, id }) => {
            let d = admin.dead_letter(*shard, id)?;
            let t = format!(
                "shard {}\nid {}\noriginal id {}\nkey {}\nattempts {}\nepoch {}\nreason {}\npayload {}\n",
                d.shard,
                d.id,
                d.original_id,
                String::from_utf8_lossy(&d.key),
                d.attempts,
                d.epoch,
                d.reason,
                String::from_utf8_lossy(&d.payload)
            );
            (dead_json(&d), t)
        }
        Command::DeadLetters(Dead::Replay(p)) => {
            let ids = picked(p)?;
            let done = admin.replay(p.shard, &ids, p.dry_run)?;
            let doc = json!({
                "dry_run": p.dry_run,
                "replayed": done.iter().map(|r| json!({
                    "shard": r.shard, "dead_letter_id": r.dead_letter_id, "new_id": r.new_id,
                })).collect::<Vec<_>>(),
            });
            let verb = if p.dry_run {
                "would replay"
            } else {
                "replayed"
            };
            let t = done
                .iter()
                .map(|r| {
                    format!(
                        "{verb} {} -> shard {} {}\n",
                        r.dead_letter_id,
                        r.shard,
                        r.new_id.as_deref().unwrap_or("")
                    )
                })
                .collect();
            (doc, t)
        }
        Command::DeadLetters(Dead::Purge(p)) => {
            let ids = picked(p)?;
            let done = admin.purge(p.shard, &ids, p.dry_run)?;
            let verb = if p.dry_run { "would purge" } else { "purged" };
            let t = done.iter().map(|id| format!("{verb} {id}\n")).collect();
            (json!({"dry_run": p.dry_run, "purged": done}), t)
        }
        Command::Cleanup { dry_run } => {
            let r = admin.cleanup(*dry_run)?;
            let doc = json!({
                "dry_run": r.dry_run,
                "deleted": r.deleted,
                "refused": r.refused.iter().map(|s| json!({
                    "consumer": s.consumer, "pending": s.pending, "shards": s.shards,
                })).collect::<Vec<_>>(),
            });
            let verb = if r.dry_run { "would delete" } else { "deleted" };
            let mut t: String = r.deleted.iter().map(|c| format!("{verb} {c}\n")).collect();
            for s in &r.refused {
                t += &format!(
                    "refused {}: {} pending entries (shards {:?})\n",
                    s.consumer, s.pending, s.shards
                );
            }
            (doc, t)
        }
    };
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{table}");
    }
    Ok(())
}

fn picked(p: &Pick) -> Result<Vec<String>, String> {
    if p.ids.is_empty() && !p.all {
        return Err("name dead-letter ids, or --all".to_owned());
    }
    Ok(p.ids.clone())
}

fn ms(d: Option<Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_millis() as u64))
}

fn inspect(r: GroupReport) -> (Value, String) {
    let doc = json!({
        "topic": r.topic,
        "group": r.group,
        "shards": r.shards.iter().map(|s| json!({
            "shard": s.shard,
            "owner": s.owner,
            "owner_alive": s.owner_alive,
            "epoch": s.epoch,
            "lease_left_ms": ms(s.lease_left),
            "length": s.length,
            "lag": s.lag,
            "pending": s.pending,
            "oldest_pending_ms": ms(s.oldest_pending),
            "dead_letters": s.dead_letters,
            "quarantined": s.quarantined.iter().map(|q| json!({
                "key": String::from_utf8_lossy(&q.key), "entry_id": q.entry_id,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "members": r.members.iter().map(|m| json!({
            "id": m.id, "alive": m.alive, "last_seen_ms": m.last_seen.as_millis() as u64,
        })).collect::<Vec<_>>(),
    });
    let mut t = format!(
        "topic {} group {}\nSHARD  OWNER                 EPOCH          LEASE LEFT  LAG     PENDING  OLDEST PENDING  DEAD\n",
        r.topic, r.group
    );
    for s in &r.shards {
        let owner = match (&s.owner, s.owner_alive) {
            (Some(o), Some(false)) => format!("{o} (dead)"),
            (Some(o), _) => o.clone(),
            (None, _) => "-".to_owned(),
        };
        let dur = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{d:.1?}"));
        t += &format!(
            "{:<6} {:<21} {:<14} {:<11} {:<7} {:<8} {:<15} {}\n",
            s.shard,
            owner,
            s.epoch,
            dur(s.lease_left),
            s.lag.map_or("?".to_owned(), |l| l.to_string()),
            s.pending,
            dur(s.oldest_pending),
            s.dead_letters
        );
    }
    let held: Vec<String> = r
        .shards
        .iter()
        .flat_map(|s| {
            s.quarantined.iter().map(move |q| {
                format!(
                    "{:<6} {:<21} {}\n",
                    s.shard,
                    String::from_utf8_lossy(&q.key),
                    q.entry_id
                )
            })
        })
        .collect();
    if !held.is_empty() {
        t += "QUARANTINED\nSHARD  KEY                   ENTRY\n";
        t += &held.concat();
    }
    t += "MEMBERS\n";
    for m in &r.members {
        let state = if m.alive { "alive" } else { "silent" };
        t += &format!("{:<21} {state}, last seen {:.1?} ago\n", m.id, m.last_seen);
    }
    (doc, t)
}

fn members(r: MembersReport) -> (Value, String) {
    let doc = json!({
        "members": r.members.iter().map(|m| json!({
            "id": m.id, "alive": m.alive, "last_seen_ms": m.last_seen.as_millis() as u64,
        })).collect::<Vec<_>>(),
        "stragglers": r.stragglers.iter().map(|s| json!({
            "consumer": s.consumer, "pending": s.pending, "shards": s.shards,
        })).collect::<Vec<_>>(),
    });
    let mut t = String::from("MEMBER                STATE   LAST SEEN\n");
    for m in &r.members {
        let state = if m.alive { "alive" } else { "silent" };
        t += &format!("{:<21} {state:<7} {:.1?} ago\n", m.id, m.last_seen);
    }
    t += "CONSUMERS WITHOUT A LIVE MEMBER\n";
    for s in &r.stragglers {
        t += &format!(
            "{:<21} {} pending (shards {:?})\n",
            s.consumer, s.pending, s.shards
        );
    }
    (doc, t)
}

fn dead_json(d: &DeadLetter) -> Value {
    json!({
        "shard": d.shard,
        "id": d.id,
        "original_id": d.original_id,
        "key": String::from_utf8_lossy(&d.key),
        "payload": String::from_utf8_lossy(&d.payload),
        "attempts": d.attempts,
        "reason": d.reason,
        "epoch": d.epoch,
    })
}
