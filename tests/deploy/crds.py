"""Structural schemas of the custom resources in the overlays, written by hand.

kubernetes-validate bundles the schemas of Kubernetes' own kinds only; the operators' CRDs
(KEDA's ScaledObject and TriggerAuthentication, Strimzi's Kafka, KafkaNodePool, KafkaTopic and
KafkaUser) are not in it, and this
repository does not vendor them. These schemas were checked by hand against KEDA 2.x
(keda.sh/v1alpha1) and Strimzi 0.4x (kafka.strimzi.io/v1beta2). They cover what the manifests
use: required fields, types and enums, and no unknown key where the manifests write one (the
typo a cluster would reject only at apply time). Fields the manifests do not use are left out,
so adding one means adding it here, after checking it against the CRD.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def _object(properties: Schema, *, required: tuple[str, ...] = (), strict: bool = True) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, "required": list(required)}
    if strict:
        schema["additionalProperties"] = False
    return schema


_STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_QUANTITY: Schema = {"type": ["string", "integer"]}
_RESOURCES = _object(
    {
        "requests": {"type": "object", "additionalProperties": _QUANTITY},
        "limits": {"type": "object", "additionalProperties": _QUANTITY},
    }
)


def _resource(api_version: str, kind: str, spec: Schema, *, labels: Schema | None = None) -> Schema:
    metadata = _object(
        {
            "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
            "namespace": {"type": "string"},
            "labels": labels or _STRING_MAP,
            "annotations": _STRING_MAP,
        },
        required=("name",),
    )
    return _object(
        {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": metadata,
            "spec": spec,
        },
        required=("apiVersion", "kind", "metadata", "spec"),
    )


# ---------------------------------------------------------------- KEDA

_HPA_RULES = _object(
    {
        "stabilizationWindowSeconds": {"type": "integer", "minimum": 0, "maximum": 3600},
        "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
        "policies": {
            "type": "array",
            "minItems": 1,
            "items": _object(
                {
                    "type": {"enum": ["Pods", "Percent"]},
                    "value": {"type": "integer", "minimum": 1},
                    "periodSeconds": {"type": "integer", "minimum": 1, "maximum": 1800},
                },
                required=("type", "value", "periodSeconds"),
            ),
        },
    }
)

# The metadata keys of KEDA's Apache Kafka scaler; every value is a string in the CRD.
_KAFKA_SCALER_KEYS = [
    "bootstrapServers",
    "consumerGroup",
    "topic",
    "lagThreshold",
    "activationLagThreshold",
    "offsetResetPolicy",
    "allowIdleConsumers",
    "excludePersistentLag",
    "scaleToZeroOnInvalidOffset",
    "limitToPartitionsWithLag",
    "partitionLimitation",
    "ensureEvenDistributionOfPartitions",
    "version",
    "sasl",
    "tls",
    "unsafeSsl",
]

SCALED_OBJECT = _resource(
    "keda.sh/v1alpha1",
    "ScaledObject",
    _object(
        {
            "scaleTargetRef": _object(
                {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "envSourceContainerName": {"type": "string"},
                },
                required=("name",),
            ),
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 1},
            "idleReplicaCount": {"type": "integer", "minimum": 0},
            "pollingInterval": {"type": "integer", "minimum": 1},
            "cooldownPeriod": {"type": "integer", "minimum": 0},
            "advanced": _object(
                {
                    "restoreToOriginalReplicaCount": {"type": "boolean"},
                    "horizontalPodAutoscalerConfig": _object(
                        {
                            "name": {"type": "string"},
                            "behavior": _object({"scaleUp": _HPA_RULES, "scaleDown": _HPA_RULES}),
                        }
                    ),
                }
            ),
            "triggers": {
                "type": "array",
                "minItems": 1,
                "items": _object(
                    {
                        # The only scaler the manifests use; another needs its keys listed.
                        "type": {"const": "kafka"},
                        "name": {"type": "string"},
                        "metadata": {
                            "type": "object",
                            "propertyNames": {"enum": _KAFKA_SCALER_KEYS},
                            "additionalProperties": {"type": "string"},
                            "required": ["bootstrapServers", "consumerGroup", "lagThreshold"],
                            "properties": {
                                "offsetResetPolicy": {"enum": ["earliest", "latest"]},
                                "lagThreshold": {"pattern": r"^[1-9][0-9]*$"},
                                "allowIdleConsumers": {"enum": ["true", "false"]},
                            },
                        },
                        "authenticationRef": _object(
                            {"name": {"type": "string"}, "kind": {"type": "string"}},
                            required=("name",),
                        ),
                    },
                    required=("type", "metadata"),
                ),
            },
        },
        required=("scaleTargetRef", "triggers"),
    ),
)

# ---------------------------------------------------------------- Strimzi

_CLUSTER_LABEL: Schema = {
    "type": "object",
    "additionalProperties": {"type": "string"},
    "required": ["strimzi.io/cluster"],
}
_CONFIG: Schema = {
    "type": "object",
    "additionalProperties": {"type": ["string", "integer", "boolean", "number"]},
}
_LOOSE: Schema = {"type": "object"}  # pod templates, JVM options: the CRD's own schema applies

KAFKA_TOPIC = _resource(
    "kafka.strimzi.io/v1beta2",
    "KafkaTopic",
    _object(
        {
            "topicName": {"type": "string", "pattern": r"^[A-Za-z0-9._-]{1,249}$"},
            "partitions": {"type": "integer", "minimum": 1},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 32767},
            "config": _CONFIG,
        }
    ),
    labels=_CLUSTER_LABEL,
)

KAFKA_NODE_POOL = _resource(
    "kafka.strimzi.io/v1beta2",
    "KafkaNodePool",
    _object(
        {
            "replicas": {"type": "integer", "minimum": 0},
            "roles": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {"enum": ["controller", "broker"]},
            },
            "storage": _object(
                {
                    "type": {"const": "jbod"},
                    "volumes": {
                        "type": "array",
                        "minItems": 1,
                        "items": _object(
                            {
                                "id": {"type": "integer", "minimum": 0},
                                "type": {"enum": ["persistent-claim", "ephemeral"]},
                                "size": {"type": "string", "pattern": r"^[0-9]+([KMGTPE]i)?$"},
                                "class": {"type": "string"},
                                "deleteClaim": {"type": "boolean"},
                                "kraftMetadata": {"enum": ["shared"]},
                            },
                            required=("id", "type"),
                        ),
                    },
                },
                required=("type", "volumes"),
            ),
            "resources": _RESOURCES,
            "jvmOptions": _LOOSE,
            "template": _LOOSE,
        },
        required=("replicas", "roles", "storage"),
    ),
    labels=_CLUSTER_LABEL,
)

_NETWORK_POLICY_PEER = _object(
    {
        "podSelector": _LOOSE,
        "namespaceSelector": _LOOSE,
        "ipBlock": _LOOSE,
    }
)

KAFKA = _resource(
    "kafka.strimzi.io/v1beta2",
    "Kafka",
    _object(
        {
            "kafka": _object(
                {
                    "version": {"type": "string"},
                    "metadataVersion": {"type": "string"},
                    "listeners": {
                        "type": "array",
                        "minItems": 1,
                        "items": _object(
                            {
                                "name": {"type": "string", "pattern": r"^[a-z0-9]{1,11}$"},
                                "port": {"type": "integer", "minimum": 9092},
                                "type": {
                                    "enum": [
                                        "internal",
                                        "route",
                                        "loadbalancer",
                                        "nodeport",
                                        "ingress",
                                        "cluster-ip",
                                    ]
                                },
                                "tls": {"type": "boolean"},
                                "authentication": _LOOSE,
                                "configuration": _LOOSE,
                                "networkPolicyPeers": {
                                    "type": "array",
                                    "items": _NETWORK_POLICY_PEER,
                                },
                            },
                            required=("name", "port", "type", "tls"),
                        ),
                    },
                    "authorization": _object(
                        {
                            "type": {"enum": ["simple", "opa", "keycloak", "custom"]},
                            "superUsers": {"type": "array", "items": {"type": "string"}},
                        },
                        required=("type",),
                    ),
                    "config": _CONFIG,
                    "resources": _RESOURCES,
                    "template": _LOOSE,
                    "rack": _LOOSE,
                },
                required=("listeners",),
            ),
            "entityOperator": _object({"topicOperator": _LOOSE, "userOperator": _LOOSE}),
        },
        required=("kafka",),
    ),
)

_ACL_OPERATIONS = [
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "AlterConfigs",
    "DescribeConfigs",
    "IdempotentWrite",
    "All",
]

KAFKA_USER = _resource(
    "kafka.strimzi.io/v1beta2",
    "KafkaUser",
    _object(
        {
            "authentication": _object(
                {"type": {"enum": ["tls", "tls-external", "scram-sha-512"]}},
                required=("type",),
            ),
            "authorization": _object(
                {
                    "type": {"const": "simple"},
                    "acls": {
                        "type": "array",
                        "items": _object(
                            {
                                "resource": _object(
                                    {
                                        "type": {
                                            "enum": ["topic", "group", "cluster", "transactionalId"]
                                        },
                                        "name": {"type": "string"},
                                        "patternType": {"enum": ["literal", "prefix"]},
                                    },
                                    required=("type",),
                                ),
                                "type": {"enum": ["allow", "deny"]},
                                "operations": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"enum": _ACL_OPERATIONS},
                                },
                                "host": {"type": "string"},
                            },
                            required=("resource", "operations"),
                        ),
                    },
                },
                required=("type", "acls"),
            ),
        }
    ),
    labels=_CLUSTER_LABEL,
)

TRIGGER_AUTHENTICATION = _resource(
    "keda.sh/v1alpha1",
    "TriggerAuthentication",
    _object(
        {
            "env": {
                "type": "array",
                "items": _object(
                    {
                        "parameter": {"type": "string"},
                        "name": {"type": "string"},
                        "containerName": {"type": "string"},
                    },
                    required=("parameter", "name"),
                ),
            },
            "secretTargetRef": {
                "type": "array",
                "items": _object(
                    {
                        "parameter": {"type": "string"},
                        "name": {"type": "string"},
                        "key": {"type": "string"},
                    },
                    required=("parameter", "name", "key"),
                ),
            },
        }
    ),
)

BY_KIND: dict[tuple[str, str], Schema] = {
    ("keda.sh/v1alpha1", "TriggerAuthentication"): TRIGGER_AUTHENTICATION,
    ("kafka.strimzi.io/v1beta2", "KafkaUser"): KAFKA_USER,
    ("keda.sh/v1alpha1", "ScaledObject"): SCALED_OBJECT,
    ("kafka.strimzi.io/v1beta2", "KafkaTopic"): KAFKA_TOPIC,
    ("kafka.strimzi.io/v1beta2", "KafkaNodePool"): KAFKA_NODE_POOL,
    ("kafka.strimzi.io/v1beta2", "Kafka"): KAFKA,
}
