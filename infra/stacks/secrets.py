"""The two secrets the service needs: the database URL and the secret-encryption key.

Either imported by complete ARN (context ``database_url_secret_arn`` /
``encryption_key_secret_arn``) or created empty. An empty secret is a real Secrets Manager
secret with no value yet: CloudFormation never sees the plaintext, and the operator sets it
once with ``aws secretsmanager put-secret-value`` before the first invocation.
"""

from __future__ import annotations

from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct


class AppSecrets(Construct):
    """Holds ``database_url`` and ``encryption_key`` as :class:`ISecret`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stack_name: str,
        database_url_secret_arn: str | None,
        encryption_key_secret_arn: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.database_url = self._secret(
            "DatabaseUrl",
            arn=database_url_secret_arn,
            name=f"{stack_name}/database-url",
            description="Task Executor: postgresql:// URL of the CockroachDB cluster (TLS).",
        )
        self.encryption_key = self._secret(
            "EncryptionKey",
            arn=encryption_key_secret_arn,
            name=f"{stack_name}/secret-encryption-key",
            description="Task Executor: base64 of 32 random bytes, encrypts secrets at rest.",
        )

    def _secret(
        self, construct_id: str, *, arn: str | None, name: str, description: str
    ) -> secretsmanager.ISecret:
        if arn:
            return secretsmanager.Secret.from_secret_complete_arn(self, construct_id, arn)
        # L1 on purpose: the L2 Secret always generates a random value, which would be a
        # wrong database URL and an invalid key; an empty secret fails loudly instead.
        cfn = secretsmanager.CfnSecret(self, construct_id, name=name, description=description)
        return secretsmanager.Secret.from_secret_complete_arn(self, f"{construct_id}Ref", cfn.ref)
