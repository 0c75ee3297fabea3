#!/bin/sh
# Creates the Temporal databases on PostgreSQL and brings their schemas to
# the version this temporalio/admin-tools image carries. Every step is
# idempotent: on an existing database it only applies newer schema
# versions, which is also how an upgrade of the Temporal images migrates.
# Connection settings come from SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER and
# SQL_PASSWORD, which temporal-sql-tool reads itself.
set -eu

for db in temporal temporal_visibility; do
	case $db in
	temporal) schema=postgresql/v12/temporal ;;
	*) schema=postgresql/v12/visibility ;;
	esac
	echo "schema of $db: $schema"
	temporal-sql-tool --db "$db" create-database
	temporal-sql-tool --db "$db" setup-schema -v 0.0
	temporal-sql-tool --db "$db" update-schema --schema-name "$schema"
done
echo "temporal schema is up to date"
