//! ApiVersions: advertises the dispatch table's APIs and version ranges.
//! (An unsupported ApiVersions version is answered in `connection`, since it
//! cannot be decoded.)

use chronik_protocol::api::api_versions_response;
use chronik_protocol::Response;
use kafka_protocol::messages::ApiVersionsRequest;

use super::Handled;

pub fn handle(_version: i16, _request: ApiVersionsRequest) -> Option<Handled> {
    Handled::new(Response::ApiVersions(api_versions_response(0)), false)
}
