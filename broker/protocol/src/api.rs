//! The broker's API dispatch table: which Kafka APIs and versions it serves,
//! and the typed request/response enums generated from that table.
//!
//! Owns: the single list of supported (API, version range) pairs — the same
//! list ApiVersions advertises and request decoding enforces — and the
//! decode/encode dispatch for each entry. Must not: hold broker state or
//! decide how a request is answered (that is the server's handlers).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::error::{EncodeError, RequestError};
use crate::header::RawHeader;
use crate::share_wire::{
    DescribeShareGroupOffsetsRequestWire, DescribeShareGroupOffsetsResponseWire,
    ShareAcknowledgeRequestWire, ShareAcknowledgeResponseWire, ShareFetchRequestWire,
    ShareFetchResponseWire,
};

macro_rules! api_table {
    ($( $variant:ident : $req:ty => $resp:ty, versions $min:literal ..= $max:literal; )*) => {
        /// A decoded request body of one of the supported APIs.
        #[derive(Debug, Clone)]
        pub enum Request { $( $variant($req), )* }

        /// A response body of one of the supported APIs.
        #[derive(Debug, Clone)]
        pub enum Response { $( $variant($resp), )* }

        /// Every (API, min version, max version) this broker serves.
        pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[ $( (ApiKey::$variant, $min, $max), )* ];

        impl Request {
            pub fn api_key(&self) -> ApiKey {
                match self { $( Request::$variant(_) => ApiKey::$variant, )* }
            }

            /// The default (empty) request of `api_key`, if supported.
            pub fn default_for(api_key: ApiKey) -> Option<Request> {
                match api_key {
                    $( ApiKey::$variant => Some(Request::$variant(<$req>::default())), )*
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }

            /// A whole request frame body (header and request, without the
            /// size prefix) as a client sends it: for tests and fuzz seeds.
            pub fn encode_frame(&self, version: i16, correlation_id: i32) -> Result<Bytes, EncodeError> {
                let api = api_name(self.api_key());
                let mut buf = BytesMut::new();
                match self {
                    $( Request::$variant(r) => {
                        RequestHeader::default()
                            .with_request_api_key(self.api_key() as i16)
                            .with_request_api_version(version)
                            .with_correlation_id(correlation_id)
                            .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_static_str("chronik-seed")))
                            .encode(&mut buf, <$req as kafka_protocol::protocol::HeaderVersion>::header_version(version))
                            .map_err(|e| EncodeError { api, version, reason: e.to_string() })?;
                        r.encode(&mut buf, version).map_err(|e| EncodeError { api, version, reason: e.to_string() })?;
                    } )*
                }
                Ok(buf.freeze())
            }

            /// Decodes a request body of `api_key` at `version`; the caller has
            /// already checked that the version is supported.
            pub(crate) fn decode_body(api_key: ApiKey, version: i16, body: &mut Bytes) -> Result<Request, RequestError> {
                match api_key {
                    $( ApiKey::$variant => <$req>::decode(body, version)
                        .map(Request::$variant)
                        .map_err(|e| RequestError::Malformed { api: api_name(api_key), version, reason: e.to_string() }), )*
                    #[allow(unreachable_patterns)]
                    other => Err(RequestError::UnknownApiKey { api_key: other as i16, correlation_id: -1 }),
                }
            }
        }

        impl Response {
            pub fn api_key(&self) -> ApiKey {
                match self { $( Response::$variant(_) => ApiKey::$variant, )* }
            }

            fn encode_body(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {
                let result = match self { $( Response::$variant(r) => r.encode(buf, version), )* };
                result.map_err(|e| EncodeError { api: api_name(self.api_key()), version, reason: e.to_string() })
            }
        }
    };
}

api_table! {
    Produce: ProduceRequest => ProduceResponse, versions 3 ..= 12;
    Fetch: FetchRequest => FetchResponse, versions 4 ..= 16;
    ListOffsets: ListOffsetsRequest => ListOffsetsResponse, versions 1 ..= 10;
    Metadata: MetadataRequest => MetadataResponse, versions 0 ..= 12;
    ApiVersions: ApiVersionsRequest => ApiVersionsResponse, versions 0 ..= 4;
    CreateTopics: CreateTopicsRequest => CreateTopicsResponse, versions 2 ..= 7;
    DeleteTopics: DeleteTopicsRequest => DeleteTopicsResponse, versions 1 ..= 6;
    DescribeConfigs: DescribeConfigsRequest => DescribeConfigsResponse, versions 1 ..= 4;
    FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse, versions 0 ..= 6;
    JoinGroup: JoinGroupRequest => JoinGroupResponse, versions 0 ..= 9;
    SyncGroup: SyncGroupRequest => SyncGroupResponse, versions 0 ..= 5;
    Heartbeat: HeartbeatRequest => HeartbeatResponse, versions 0 ..= 4;
    LeaveGroup: LeaveGroupRequest => LeaveGroupResponse, versions 0 ..= 5;
    OffsetCommit: OffsetCommitRequest => OffsetCommitResponse, versions 2 ..= 9;
    OffsetFetch: OffsetFetchRequest => OffsetFetchResponse, versions 1 ..= 9;
    ListGroups: ListGroupsRequest => ListGroupsResponse, versions 0 ..= 5;
    DescribeGroups: DescribeGroupsRequest => DescribeGroupsResponse, versions 0 ..= 6;
    DeleteGroups: DeleteGroupsRequest => DeleteGroupsResponse, versions 0 ..= 2;
    InitProducerId: InitProducerIdRequest => InitProducerIdResponse, versions 0 ..= 5;
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse, versions 2 ..= 4;
    AddPartitionsToTxn: AddPartitionsToTxnRequest => AddPartitionsToTxnResponse, versions 0 ..= 5;
    AddOffsetsToTxn: AddOffsetsToTxnRequest => AddOffsetsToTxnResponse, versions 0 ..= 4;
    EndTxn: EndTxnRequest => EndTxnResponse, versions 0 ..= 4;
    WriteTxnMarkers: WriteTxnMarkersRequest => WriteTxnMarkersResponse, versions 1 ..= 1;
    TxnOffsetCommit: TxnOffsetCommitRequest => TxnOffsetCommitResponse, versions 0 ..= 4;
    DescribeTransactions: DescribeTransactionsRequest => DescribeTransactionsResponse, versions 0 ..= 0;
    ListTransactions: ListTransactionsRequest => ListTransactionsResponse, versions 0 ..= 1;
    CreatePartitions: CreatePartitionsRequest => CreatePartitionsResponse, versions 0 ..= 3;
    AlterConfigs: AlterConfigsRequest => AlterConfigsResponse, versions 0 ..= 2;
    IncrementalAlterConfigs: IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, versions 0 ..= 1;
    DescribeCluster: DescribeClusterRequest => DescribeClusterResponse, versions 0 ..= 2;
    DescribeLogDirs: DescribeLogDirsRequest => DescribeLogDirsResponse, versions 1 ..= 4;
    OffsetDelete: OffsetDeleteRequest => OffsetDeleteResponse, versions 0 ..= 0;
    DeleteRecords: DeleteRecordsRequest => DeleteRecordsResponse, versions 0 ..= 2;
    ConsumerGroupHeartbeat: ConsumerGroupHeartbeatRequest => ConsumerGroupHeartbeatResponse, versions 0 ..= 1;
    ConsumerGroupDescribe: ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse, versions 0 ..= 1;
    DescribeAcls: DescribeAclsRequest => DescribeAclsResponse, versions 1 ..= 3;
    CreateAcls: CreateAclsRequest => CreateAclsResponse, versions 1 ..= 3;
    DeleteAcls: DeleteAclsRequest => DeleteAclsResponse, versions 1 ..= 3;
    SaslHandshake: SaslHandshakeRequest => SaslHandshakeResponse, versions 0 ..= 1;
    SaslAuthenticate: SaslAuthenticateRequest => SaslAuthenticateResponse, versions 0 ..= 2;
    DescribeUserScramCredentials: DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse, versions 0 ..= 0;
    AlterUserScramCredentials: AlterUserScramCredentialsRequest => AlterUserScramCredentialsResponse, versions 0 ..= 0;
    ElectLeaders: ElectLeadersRequest => ElectLeadersResponse, versions 0 ..= 2;
    AlterPartitionReassignments: AlterPartitionReassignmentsRequest => AlterPartitionReassignmentsResponse, versions 0 ..= 1;
    ListPartitionReassignments: ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse, versions 0 ..= 0;
    DescribeQuorum: DescribeQuorumRequest => DescribeQuorumResponse, versions 0 ..= 2;
    UnregisterBroker: UnregisterBrokerRequest => UnregisterBrokerResponse, versions 0 ..= 0;
    AddRaftVoter: AddRaftVoterRequest => AddRaftVoterResponse, versions 0 ..= 0;
    RemoveRaftVoter: RemoveRaftVoterRequest => RemoveRaftVoterResponse, versions 0 ..= 0;
    UpdateRaftVoter: UpdateRaftVoterRequest => UpdateRaftVoterResponse, versions 0 ..= 0;
    UpdateFeatures: UpdateFeaturesRequest => UpdateFeaturesResponse, versions 0 ..= 2;
    DescribeTopicPartitions: DescribeTopicPartitionsRequest => DescribeTopicPartitionsResponse, versions 0 ..= 0;
    DescribeClientQuotas: DescribeClientQuotasRequest => DescribeClientQuotasResponse, versions 0 ..= 1;
    AlterClientQuotas: AlterClientQuotasRequest => AlterClientQuotasResponse, versions 0 ..= 1;
    // Share groups (KIP-932). v0 of the share-group client APIs was early
    // access in Kafka 4.0, dropped in 4.1. ShareFetch/ShareAcknowledge v2
    // (Kafka 4.2+) and DescribeShareGroupOffsets v1 (Kafka 4.3+, KIP-1226:
    // Lag) are beyond kafka-protocol 0.18: `share_wire` carries them.
    ShareGroupHeartbeat: ShareGroupHeartbeatRequest => ShareGroupHeartbeatResponse, versions 1 ..= 1;
    ShareGroupDescribe: ShareGroupDescribeRequest => ShareGroupDescribeResponse, versions 1 ..= 1;
    ShareFetch: ShareFetchRequestWire => ShareFetchResponseWire, versions 1 ..= 2;
    ShareAcknowledge: ShareAcknowledgeRequestWire => ShareAcknowledgeResponseWire, versions 1 ..= 2;
    InitializeShareGroupState: InitializeShareGroupStateRequest => InitializeShareGroupStateResponse, versions 0 ..= 0;
    ReadShareGroupState: ReadShareGroupStateRequest => ReadShareGroupStateResponse, versions 0 ..= 0;
    WriteShareGroupState: WriteShareGroupStateRequest => WriteShareGroupStateResponse, versions 0 ..= 0;
    DeleteShareGroupState: DeleteShareGroupStateRequest => DeleteShareGroupStateResponse, versions 0 ..= 0;
    ReadShareGroupStateSummary: ReadShareGroupStateSummaryRequest => ReadShareGroupStateSummaryResponse, versions 0 ..= 0;
    DescribeShareGroupOffsets: DescribeShareGroupOffsetsRequestWire => DescribeShareGroupOffsetsResponseWire, versions 0 ..= 1;
    AlterShareGroupOffsets: AlterShareGroupOffsetsRequest => AlterShareGroupOffsetsResponse, versions 0 ..= 0;
    DeleteShareGroupOffsets: DeleteShareGroupOffsetsRequest => DeleteShareGroupOffsetsResponse, versions 0 ..= 0;
}

/// The supported version range of `api_key`, if the broker serves it.
pub fn supported_versions(api_key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED_APIS
        .iter()
        .find(|(key, _, _)| *key == api_key)
        .map(|(_, min, max)| (*min, *max))
}

/// Kafka's name for an API, for logs and metric labels.
pub fn api_name(api_key: ApiKey) -> &'static str {
    match api_key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::AddPartitionsToTxn => "AddPartitionsToTxn",
        ApiKey::AddOffsetsToTxn => "AddOffsetsToTxn",
        ApiKey::EndTxn => "EndTxn",
        ApiKey::WriteTxnMarkers => "WriteTxnMarkers",
        ApiKey::TxnOffsetCommit => "TxnOffsetCommit",
        ApiKey::DescribeTransactions => "DescribeTransactions",
        ApiKey::ListTransactions => "ListTransactions",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        ApiKey::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::ElectLeaders => "ElectLeaders",
        ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
        ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
        ApiKey::DescribeQuorum => "DescribeQuorum",
        ApiKey::UnregisterBroker => "UnregisterBroker",
        ApiKey::AddRaftVoter => "AddRaftVoter",
        ApiKey::RemoveRaftVoter => "RemoveRaftVoter",
        ApiKey::UpdateRaftVoter => "UpdateRaftVoter",
        ApiKey::UpdateFeatures => "UpdateFeatures",
        ApiKey::DescribeTopicPartitions => "DescribeTopicPartitions",
        ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
        ApiKey::AlterClientQuotas => "AlterClientQuotas",
        ApiKey::ShareGroupHeartbeat => "ShareGroupHeartbeat",
        ApiKey::ShareGroupDescribe => "ShareGroupDescribe",
        ApiKey::ShareFetch => "ShareFetch",
        ApiKey::ShareAcknowledge => "ShareAcknowledge",
        ApiKey::InitializeShareGroupState => "InitializeShareGroupState",
        ApiKey::ReadShareGroupState => "ReadShareGroupState",
        ApiKey::WriteShareGroupState => "WriteShareGroupState",
        ApiKey::DeleteShareGroupState => "DeleteShareGroupState",
        ApiKey::ReadShareGroupStateSummary => "ReadShareGroupStateSummary",
        ApiKey::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
        ApiKey::AlterShareGroupOffsets => "AlterShareGroupOffsets",
        ApiKey::DeleteShareGroupOffsets => "DeleteShareGroupOffsets",
        _ => "Other",
    }
}

/// Encodes a whole response frame: size prefix, response header (whose
/// version depends on the API and version), then the body.
pub fn encode_response(
    correlation_id: i32,
    version: i16,
    response: &Response,
) -> Result<Bytes, EncodeError> {
    let api_key = response.api_key();
    let mut buf = BytesMut::with_capacity(128);
    buf.extend_from_slice(&[0u8; 4]);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, api_key.response_header_version(version))
        .map_err(|e| EncodeError {
            api: api_name(api_key),
            version,
            reason: e.to_string(),
        })?;
    response.encode_body(&mut buf, version)?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// The ApiVersions response advertising `SUPPORTED_APIS`, with `error_code`.
pub fn api_versions_response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = SUPPORTED_APIS
        .iter()
        .map(|(key, min, max)| {
            api_versions_response::ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

/// Whether `raw` names a supported API at a supported version.
pub fn check_supported(raw: &RawHeader) -> Result<ApiKey, RequestError> {
    let api_key = ApiKey::try_from(raw.api_key).map_err(|_| RequestError::UnknownApiKey {
        api_key: raw.api_key,
        correlation_id: raw.correlation_id,
    })?;
    let (min, max) = supported_versions(api_key).ok_or(RequestError::UnknownApiKey {
        api_key: raw.api_key,
        correlation_id: raw.correlation_id,
    })?;
    if raw.api_version < min || raw.api_version > max {
        return Err(RequestError::UnsupportedVersion {
            api: api_name(api_key),
            version: raw.api_version,
            min,
            max,
            correlation_id: raw.correlation_id,
        });
    }
    Ok(api_key)
}
