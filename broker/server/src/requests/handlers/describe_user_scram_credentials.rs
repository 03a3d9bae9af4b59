//! DescribeUserScramCredentials (v0; `kafka-configs.sh --describe
//! --entity-type users`): each user's SCRAM mechanisms and iteration
//! counts — never salts or keys. No users named (null or empty) = every
//! user; a named user without credentials is RESOURCE_NOT_FOUND, a user
//! named twice DUPLICATE_RESOURCE, as Kafka answers.

use std::collections::HashSet;

use chronik_protocol::Response;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Handled;
use crate::security::sasl::scram::ScramCredentials;

pub fn handle(
    scram: &ScramCredentials,
    _version: i16,
    request: DescribeUserScramCredentialsRequest,
) -> Option<Handled> {
    let store = scram;
    let named: Vec<String> = request
        .users
        .unwrap_or_default()
        .iter()
        .map(|u| u.name.to_string())
        .collect();
    let all = named.is_empty();
    let users = if all { store.users() } else { named.clone() };
    let duplicated: HashSet<&String> = named
        .iter()
        .enumerate()
        .filter(|(i, u)| named[..*i].contains(u))
        .map(|(_, u)| u)
        .collect();
    let mut seen = HashSet::new();
    let results: Vec<_> = users
        .iter()
        .filter(|u| seen.insert(u.as_str()))
        .map(|user| {
            let result = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()));
            if duplicated.contains(user) {
                return failed(
                    result,
                    ResponseError::DuplicateResource,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                );
            }
            let infos: Vec<CredentialInfo> = store
                .describe(user)
                .into_iter()
                .map(|(mechanism, iterations)| {
                    CredentialInfo::default()
                        .with_mechanism(mechanism.type_code())
                        .with_iterations(i32::try_from(iterations).unwrap_or(i32::MAX))
                })
                .collect();
            if infos.is_empty() {
                return failed(
                    result,
                    ResponseError::ResourceNotFound,
                    "Attempt to describe a user credential that does not exist",
                );
            }
            result.with_credential_infos(infos)
        })
        .collect();
    let has_error = results.iter().any(|r| r.error_code != 0);
    Handled::new(
        Response::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default().with_results(results),
        ),
        has_error,
    )
}

fn failed(
    result: DescribeUserScramCredentialsResult,
    error: ResponseError,
    message: &'static str,
) -> DescribeUserScramCredentialsResult {
    result
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_static_str(message)))
}
