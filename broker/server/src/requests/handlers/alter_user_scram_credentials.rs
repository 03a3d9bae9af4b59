//! AlterUserScramCredentials (v0; `kafka-configs.sh --alter --add-config
//! 'SCRAM-SHA-512=[password=…]' --entity-type users --entity-name alice`):
//! the client salts the password; the broker derives the stored and server
//! keys and commits every accepted change in one command through the
//! metadata quorum, so every node authenticates with the same credentials.
//!
//! Refusals per user, as Kafka's: UNSUPPORTED_SASL_MECHANISM for an
//! unknown mechanism, UNACCEPTABLE_CREDENTIAL for an empty name, an
//! iteration count outside 4096..=16384 or an empty salt or salted password,
//! DUPLICATE_RESOURCE for a (user, mechanism) altered twice,
//! RESOURCE_NOT_FOUND for deleting a credential that does not exist. A user
//! with any refused change has none applied.

use std::collections::{BTreeMap, HashSet};

use chronik_metadata::ScramCredentialImage;
use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::requests::errors::cluster::cluster_error_code;
use crate::security::sasl::scram::{
    ScramCredential, ScramCredentials, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};
use chronik_metadata::Cluster;

/// Largest salt and salted password accepted (a SHA-512 digest is 64 bytes).
const MAX_SALT: usize = 1024;
const MAX_SALTED_PASSWORD: usize = 64;

type Refusal = (ResponseError, &'static str);

pub async fn handle(
    cluster: &Cluster,
    scram: &ScramCredentials,
    _version: i16,
    request: AlterUserScramCredentialsRequest,
) -> Option<Handled> {
    // Users in order of first mention, and the first refusal of each.
    let mut users: Vec<String> = Vec::new();
    let mut named: HashSet<String> = HashSet::new();
    let mut refused: BTreeMap<String, Refusal> = BTreeMap::new();
    let mut touched: HashSet<(String, i8)> = HashSet::new();
    let mut refuse = |user: &str, refusal: Refusal| {
        refused.entry(user.to_string()).or_insert(refusal);
    };
    let mut upsertions = Vec::new();
    let mut deletions = Vec::new();
    for d in &request.deletions {
        let user = d.name.to_string();
        if named.insert(user.clone()) {
            users.push(user.clone());
        }
        if !touched.insert((user.clone(), d.mechanism)) {
            refuse(&user, DUPLICATE);
            continue;
        }
        match check(&user, d.mechanism) {
            Err(refusal) => refuse(&user, refusal),
            Ok(mechanism) if scram.get(mechanism, &user).is_none() => refuse(
                &user,
                (
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                ),
            ),
            Ok(mechanism) => deletions.push((user, mechanism.name().to_string())),
        }
    }
    for u in &request.upsertions {
        let user = u.name.to_string();
        if named.insert(user.clone()) {
            users.push(user.clone());
        }
        if !touched.insert((user.clone(), u.mechanism)) {
            refuse(&user, DUPLICATE);
            continue;
        }
        let mechanism = match check(&user, u.mechanism) {
            Ok(m) => m,
            Err(refusal) => {
                refuse(&user, refusal);
                continue;
            }
        };
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        if iterations < MIN_ITERATIONS {
            refuse(
                &user,
                (ResponseError::UnacceptableCredential, "Too few iterations"),
            );
        } else if iterations > MAX_ITERATIONS {
            refuse(
                &user,
                (ResponseError::UnacceptableCredential, "Too many iterations"),
            );
        } else if u.salt.is_empty()
            || u.salt.len() > MAX_SALT
            || u.salted_password.is_empty()
            || u.salted_password.len() > MAX_SALTED_PASSWORD
        {
            refuse(
                &user,
                (
                    ResponseError::UnacceptableCredential,
                    "Bad salt or salted password",
                ),
            );
        } else {
            let c = ScramCredential::from_salted_password(
                mechanism,
                &u.salted_password,
                u.salt.to_vec(),
                iterations,
            );
            let image = ScramCredentialImage {
                salt: c.salt,
                iterations: c.iterations,
                stored_key: c.stored_key,
                server_key: c.server_key,
            };
            upsertions.push((user, mechanism.name().to_string(), image));
        }
    }
    upsertions.retain(|(user, _, _)| !refused.contains_key(user));
    deletions.retain(|(user, _)| !refused.contains_key(user));
    let committed = if upsertions.is_empty() && deletions.is_empty() {
        Ok(())
    } else {
        let result = cluster.alter_scram_credentials(upsertions, deletions).await;
        if result.is_ok() {
            // This node answers logins with the change at once.
            scram.replace_quorum(&cluster.image().scram_credentials);
        }
        result
    };
    let results: Vec<_> = users
        .into_iter()
        .map(|user| {
            let result = AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()));
            match (refused.get(&user), &committed) {
                (Some((error, message)), _) => result
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_static_str(message))),
                (None, Err(e)) => result
                    .with_error_code(cluster_error_code(e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                (None, Ok(())) => result,
            }
        })
        .collect();
    let has_error = results.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::AlterUserScramCredentials(
            AlterUserScramCredentialsResponse::default().with_results(results),
        ),
        has_error,
    )
}

const DUPLICATE: Refusal = (
    ResponseError::DuplicateResource,
    "A user credential cannot be altered twice in the same request",
);

fn check(user: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if user.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_type_code(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism",
    ))
}
