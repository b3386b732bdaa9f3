//! A typed client over etcd: mutual TLS, transactions of puts and deletes, prefix reads,
//! prefix watches resumed from a revision, and leases kept alive in the background.
//!
//! Keys are UTF-8 strings (the layout of [`crate::keys`]), values bytes (JSON); a key read
//! from etcd that is not UTF-8 is an error, never a panic.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::keys::{Kv, ROOT};
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, Identity,
    PutOptions, TlsOptions, Txn, TxnOp, WatchOptions, WatchResponse, WatchStream,
};

/// etcd's default limit of operations in one transaction (`--max-txn-ops`).
pub const MAX_TXN_OPS: usize = 128;

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A certificate or key file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// etcd refused or failed a request (connection, TLS, permission...).
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    /// A key or value read from etcd is not UTF-8.
    #[error("etcd holds a key or value that is not UTF-8 under {0}")]
    NotUtf8(String),
    /// A watch ended (etcd closed it or compacted past the revision).
    #[error("the watch on {0} ended")]
    WatchEnded(String),
    /// A transaction guarded by a comparison did not apply.
    #[error("the transaction on {0} was not applied (its guard failed)")]
    NotApplied(String),
    /// The connection did not answer in time.
    #[error("etcd at {0} did not answer in time")]
    Timeout(String),
}

/// The three PEM files of a mutual-TLS identity: the CA that signs everyone, and this
/// party's certificate and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate (PEM) the server's certificate must chain to.
    pub ca: PathBuf,
    /// This party's certificate (PEM), signed by the CA.
    pub cert: PathBuf,
    /// This party's private key (PEM).
    pub key: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// One write of [`Store::apply_ops`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Put the value under the key.
    Put(String, Vec<u8>),
    /// Delete the key.
    Delete(String),
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The key now holds the value.
    Put(String, Vec<u8>),
    /// The key was deleted (or its lease expired).
    Delete(String),
}

impl Change {
    /// The key changed.
    pub fn key(&self) -> &str {
        match self {
            Change::Put(k, _) | Change::Delete(k) => k,
        }
    }

    /// Applies the change to a map of keys.
    pub fn apply_to(self, map: &mut Kv) {
        match self {
            Change::Put(k, v) => {
                map.insert(k, v);
            }
            Change::Delete(k) => {
                map.remove(&k);
            }
        }
    }
}

/// The keys under a prefix and the store revision they were read at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Key → value.
    pub kvs: Kv,
    /// The revision of the read: watch from `revision + 1` to miss nothing.
    pub revision: i64,
}

/// A connected client.
#[derive(Clone)]
pub struct Store {
    client: Client,
    endpoint: String,
}

fn utf8(bytes: &[u8], prefix: &str) -> Result<String, StoreError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| StoreError::NotUtf8(prefix.to_string()))
}

impl Store {
    /// Connects to `endpoint` (`https://host:port`) with mutual TLS and checks that etcd
    /// answers (so a refused certificate is an error here, not at the first request).
    pub async fn connect(endpoint: &str, tls: &TlsFiles) -> Result<Store, StoreError> {
        let ca = read(&tls.ca)?;
        let cert = read(&tls.cert)?;
        let key = read(&tls.key)?;
        let options = ConnectOptions::new()
            .with_tls(
                TlsOptions::new()
                    .ca_certificate(Certificate::from_pem(ca))
                    .identity(Identity::from_pem(cert, key)),
            )
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
        let connect = Client::connect([endpoint], Some(options));
        let client = tokio::time::timeout(Duration::from_secs(6), connect)
            .await
            .map_err(|_| StoreError::Timeout(endpoint.to_string()))??;
        let mut store = Store {
            client,
            endpoint: endpoint.to_string(),
        };
        store.check().await?;
        Ok(store)
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One cheap request that needs no key permission (the member's status), bounded in
    /// time: does etcd answer us?
    pub async fn check(&mut self) -> Result<(), StoreError> {
        let mut m = self.client.maintenance_client();
        let status = m.status();
        tokio::time::timeout(Duration::from_secs(5), status)
            .await
            .map_err(|_| StoreError::Timeout(self.endpoint.clone()))??;
        Ok(())
    }

    /// Every key under `prefix` and the revision of the read.
    pub async fn get_prefix(&mut self, prefix: &str) -> Result<Snapshot, StoreError> {
        let resp = self
            .client
            .get(prefix, Some(GetOptions::new().with_prefix()))
            .await?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let mut kvs = Kv::new();
        for kv in resp.kvs() {
            kvs.insert(utf8(kv.key(), prefix)?, kv.value().to_vec());
        }
        Ok(Snapshot { kvs, revision })
    }

    /// The value of one key, if present.
    pub async fn get(&mut self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let resp = self.client.get(key, None).await?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    /// Puts one key, held by `lease` if given (the key goes when the lease expires).
    pub async fn put(
        &mut self,
        key: &str,
        value: &[u8],
        lease: Option<i64>,
    ) -> Result<(), StoreError> {
        let options = lease.map(|id| PutOptions::new().with_lease(id));
        self.client.put(key, value, options).await?;
        Ok(())
    }

    /// Puts and deletes a set of keys in one transaction (several if there are more than
    /// [`MAX_TXN_OPS`] operations: etcd refuses larger ones, and a watcher then sees the
    /// transactions one by one). Returns the store revision after the last one (0 when
    /// there was nothing to do).
    pub async fn apply(&mut self, puts: &Kv, deletes: &[String]) -> Result<i64, StoreError> {
        let ops: Vec<Op> = deletes
            .iter()
            .map(|k| Op::Delete(k.clone()))
            .chain(puts.iter().map(|(k, v)| Op::Put(k.clone(), v.clone())))
            .collect();
        self.apply_ops(&ops).await
    }

    /// Applies `ops` in their order, [`MAX_TXN_OPS`] to a transaction: the last operation
    /// lands in the last transaction, after (or with) every other. Returns the store
    /// revision after the last transaction (0 when there was nothing to do).
    pub async fn apply_ops(&mut self, ops: &[Op]) -> Result<i64, StoreError> {
        let mut revision = 0;
        for chunk in ops.chunks(MAX_TXN_OPS) {
            let txn: Vec<TxnOp> = chunk
                .iter()
                .map(|op| match op {
                    Op::Put(k, v) => TxnOp::put(k.as_str(), v.clone(), None),
                    Op::Delete(k) => TxnOp::delete(k.as_str(), None),
                })
                .collect();
            let resp = self.client.txn(Txn::new().and_then(txn)).await?;
            revision = resp.header().map(|h| h.revision()).unwrap_or(revision);
        }
        Ok(revision)
    }

    /// Puts `key` only if it does not exist yet (a create guard), in one transaction.
    pub async fn create(
        &mut self,
        key: &str,
        value: &[u8],
        lease: Option<i64>,
    ) -> Result<(), StoreError> {
        let options = lease.map(|id| PutOptions::new().with_lease(id));
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, options)]);
        let resp = self.client.txn(txn).await?;
        if resp.succeeded() {
            Ok(())
        } else {
            Err(StoreError::NotApplied(key.to_string()))
        }
    }

    /// Watches every key under `prefix` from `revision` on (0: from now).
    pub async fn watch_prefix(
        &mut self,
        prefix: &str,
        revision: i64,
    ) -> Result<PrefixWatch, StoreError> {
        let mut options = WatchOptions::new().with_prefix();
        if revision > 0 {
            options = options.with_start_revision(revision);
        }
        let stream = self.client.watch(prefix, Some(options)).await?;
        Ok(PrefixWatch {
            stream,
            prefix: prefix.to_string(),
        })
    }

    /// Grants a lease of `ttl` seconds and keeps it alive from a background task until the
    /// returned [`Lease`] is dropped or etcd stops answering (then [`Lease::lost`] resolves).
    pub async fn lease(&mut self, ttl: i64) -> Result<Lease, StoreError> {
        let granted = self.client.lease_grant(ttl, None).await?;
        let id = granted.id();
        let (mut keeper, mut responses) = self.client.lease_keep_alive(id).await?;
        let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
        let period = Duration::from_millis((ttl.max(1) as u64 * 1000) / 3);
        let task = tokio::spawn(async move {
            let reason = loop {
                if let Err(e) = keeper.keep_alive().await {
                    break format!("keepalive: {e}");
                }
                match tokio::time::timeout(
                    Duration::from_secs(ttl.max(1) as u64),
                    responses.message(),
                )
                .await
                {
                    Ok(Ok(Some(r))) if r.ttl() > 0 => {}
                    Ok(Ok(Some(_))) => break "the lease expired".to_string(),
                    Ok(Ok(None)) => break "the keepalive stream ended".to_string(),
                    Ok(Err(e)) => break format!("keepalive: {e}"),
                    Err(_) => break "no keepalive answer in time".to_string(),
                }
                tokio::time::sleep(period).await;
            };
            let _ = lost_tx.send(reason);
        });
        Ok(Lease {
            id,
            task,
            lost: lost_rx,
            client: self.client.clone(),
        })
    }
}

/// Role-based access control, with users named by their certificate's common name (etcd
/// 3.4 takes the CN of a client certificate as the user when auth is on and no password is
/// given): each agent may write only its own Hello and status keys and read only its own
/// plan; the controller reads and writes everything under [`ROOT`].
impl Store {
    async fn ignore_exists<T>(r: Result<T, etcd_client::Error>) -> Result<(), StoreError> {
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().contains("already exists") => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn user_with_role(&mut self, user: &str, role: &str) -> Result<(), StoreError> {
        let add = self
            .client
            .user_add(
                user,
                "",
                Some(etcd_client::UserAddOptions::new().with_no_pwd()),
            )
            .await;
        Store::ignore_exists(add).await?;
        self.client.user_grant_role(user, role).await?;
        Ok(())
    }

    /// Lets the certificate CN `user` act as the controller: read and write under [`ROOT`].
    pub async fn allow_controller(&mut self, user: &str) -> Result<(), StoreError> {
        let role = "fusebox-controller";
        Store::ignore_exists(self.client.role_add(role).await).await?;
        let perm = etcd_client::Permission::read_write(ROOT).with_prefix();
        self.client.role_grant_permission(role, perm).await?;
        self.user_with_role(user, role).await
    }

    /// Lets the certificate CN `user` act as the agent of `host`: write its Hello and status
    /// keys, read its plan prefix, nothing else.
    pub async fn allow_agent(&mut self, user: &str, host: &str) -> Result<(), StoreError> {
        let role = format!("fusebox-agent-{host}");
        Store::ignore_exists(self.client.role_add(role.as_str()).await).await?;
        let perms = [
            etcd_client::Permission::read_write(crate::keys::hello_key(host)),
            etcd_client::Permission::read_write(crate::keys::status_key(host)),
            etcd_client::Permission::read(crate::keys::plan_prefix(host)).with_prefix(),
        ];
        for p in perms {
            self.client.role_grant_permission(role.as_str(), p).await?;
        }
        self.user_with_role(user, &role).await
    }

    /// Turns authentication on, with the certificate CN `root` as etcd's root user (etcd
    /// requires one; keep its certificate for administration only). Call it with a client
    /// whose certificate's CN is `root`, after [`Store::allow_controller`] and
    /// [`Store::allow_agent`] (or before: they need the root user then).
    pub async fn enable_auth(&mut self) -> Result<(), StoreError> {
        self.user_with_role("root", "root").await?;
        Store::ignore_exists(self.client.auth_enable().await).await
    }
}

/// A lease kept alive in the background.
pub struct Lease {
    id: i64,
    task: tokio::task::JoinHandle<()>,
    lost: tokio::sync::oneshot::Receiver<String>,
    client: Client,
}

impl Lease {
    /// The lease id (for [`Store::put`]).
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Resolves when the keepalive fails (with the reason).
    pub async fn lost(&mut self) -> String {
        (&mut self.lost)
            .await
            .unwrap_or_else(|_| "the keepalive task ended".to_string())
    }

    /// Revokes the lease now (its keys go at once) and stops the keepalive.
    pub async fn revoke(mut self) -> Result<(), StoreError> {
        self.task.abort();
        self.client.lease_revoke(self.id).await?;
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A watch on a prefix.
pub struct PrefixWatch {
    stream: WatchStream,
    prefix: String,
}

impl PrefixWatch {
    /// The next batch of changes and the revision it brings the prefix to. An error when
    /// the watch ends or was cancelled (compaction, connection lost): read the prefix again.
    pub async fn next(&mut self) -> Result<(Vec<Change>, i64), StoreError> {
        loop {
            let resp: WatchResponse = match self.stream.message().await? {
                Some(r) => r,
                None => return Err(StoreError::WatchEnded(self.prefix.clone())),
            };
            if resp.canceled() {
                return Err(StoreError::WatchEnded(self.prefix.clone()));
            }
            let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
            let mut changes = Vec::with_capacity(resp.events().len());
            for event in resp.events() {
                let Some(kv) = event.kv() else { continue };
                let key = utf8(kv.key(), &self.prefix)?;
                changes.push(match event.event_type() {
                    EventType::Put => Change::Put(key, kv.value().to_vec()),
                    EventType::Delete => Change::Delete(key),
                });
            }
            if !changes.is_empty() {
                return Ok((changes, revision));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_applies_to_a_map() {
        let mut m = Kv::new();
        Change::Put("k".into(), b"v".to_vec()).apply_to(&mut m);
        assert_eq!(m.get("k").map(Vec::as_slice), Some(&b"v"[..]));
        Change::Delete("k".into()).apply_to(&mut m);
        assert!(m.is_empty());
    }
}
