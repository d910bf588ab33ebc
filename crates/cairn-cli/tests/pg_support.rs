//! The PostgreSQL test harness: a fresh database of the test's own on the test server, dropped
//! (`WITH (FORCE)`) when the handle goes.
//!
//! The server is `CAIRN_TEST_PG_URL`, else `CAIRN_PG_URL`, else
//! `postgres://postgres@127.0.0.1:5432/postgres`. When neither variable is set and no server
//! answers, [`TestDb::new`] prints why and returns `None` (the test is skipped); when one is
//! set (CI), a missing server fails the test.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub struct TestDb {
    /// The test database's URL.
    pub url: String,
    /// The database's name (`cairn_t_<pid>_<counter>`).
    pub name: String,
    admin: String,
}

fn base_url() -> (String, bool) {
    for var in ["CAIRN_TEST_PG_URL", "CAIRN_PG_URL"] {
        if let Ok(url) = std::env::var(var)
            && !url.trim().is_empty()
        {
            return (url.trim().to_string(), true);
        }
    }
    (
        "postgres://postgres@127.0.0.1:5432/postgres".to_string(),
        false,
    )
}

/// `url` with its database replaced by `name` (the query dropped).
pub fn with_database(url: &str, name: &str) -> String {
    let url = url.split('?').next().unwrap_or_default();
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let authority = rest.split('/').next().unwrap_or_default();
    format!("{scheme}://{authority}/{name}")
}

pub fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect to the test server")
}

impl TestDb {
    pub fn new() -> Option<TestDb> {
        let (admin, required) = base_url();
        let mut client = match postgres::Client::connect(&admin, postgres::NoTls) {
            Ok(client) => client,
            Err(error) if !required => {
                eprintln!(
                    "SKIPPED: no PostgreSQL server answers at {} ({error}) and neither CAIRN_TEST_PG_URL nor CAIRN_PG_URL is set",
                    with_database(&admin, "postgres")
                );
                return None;
            }
            Err(error) => panic!("the PostgreSQL test server does not answer: {error}"),
        };
        let available: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'",
                &[],
            )
            .expect("read the catalog")
            .get(0);
        assert_eq!(
            available, 1,
            "pgvector is not installed on the test server: run scripts/install-pgvector.sh"
        );
        let name = format!(
            "cairn_t_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        // Two calls: a batch is one transaction, which CREATE DATABASE refuses.
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drop a leftover test database");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create the test database");
        Some(TestDb {
            url: with_database(&admin, &name),
            name,
            admin,
        })
    }

    pub fn client(&self) -> postgres::Client {
        connect(&self.url)
    }

    /// The URL with a password the server ignores (trust authentication on the test server).
    pub fn url_with_password(&self, password: &str) -> String {
        self.url
            .replacen("://postgres@", &format!("://postgres:{password}@"), 1)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}
