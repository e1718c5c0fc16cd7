# A project with a Postgres connector, an email channel and an alert rule on the connector's runs.
# Install the provider first: `dpctl provider install`; credentials come from DATAPLATFORM_URL,
# DATAPLATFORM_API_KEY or DATAPLATFORM_EMAIL + DATAPLATFORM_PASSWORD, DATAPLATFORM_CA_FILE.
terraform {
  required_providers {
    dataplatform = {
      source  = "dataplatform/dataplatform"
      version = "0.1.0"
    }
  }
}

provider "dataplatform" {}

# Not "analytics": the demo tenant of `npm start` already has that project.
variable "project_name" {
  type    = string
  default = "tf-analytics"
}

variable "project_description" {
  type    = string
  default = "Managed by Terraform"
}

variable "connector_type" {
  type    = string
  default = "postgresql"
}

# Extra spaces on purpose: the API stores "0 2 * * *"; the plan stays empty.
variable "sync_schedule" {
  type    = string
  default = "0  2 * * *"
}

# Give it with TF_VAR_db_password. Ephemeral and sent as a write-only argument, so it is never
# in the plan or the state (Terraform 1.11 or later).
variable "db_password" {
  type      = string
  sensitive = true
  ephemeral = true
  default   = "change-me"
}

# Write-only values are not stored, so Terraform cannot see them change: raise this number to
# send a new db_password.
variable "db_password_version" {
  type    = number
  default = 1
}

variable "alert_severity" {
  type    = string
  default = "warning"
}

resource "dataplatform_project" "main" {
  name        = var.project_name
  description = var.project_description
}

resource "dataplatform_connector" "orders" {
  project_id     = dataplatform_project.main.id
  name           = "orders-db"
  connector_type = var.connector_type
  config = {
    host     = "db.internal"
    port     = 5432
    database = "orders"
  }
  credentials = {
    username            = "reader"
    password_wo         = var.db_password
    password_wo_version = var.db_password_version
  }
  selected_tables = ["public.orders", "public.customers"]
  schedule        = var.sync_schedule
  labels = {
    team = "data"
  }
}

resource "dataplatform_notification_channel" "oncall" {
  project_id = dataplatform_project.main.id
  name       = "oncall"
  type       = "email"
  config = {
    email_addresses = ["oncall@example.com"]
  }
}

resource "dataplatform_alert_rule" "sync_failures" {
  project_id = dataplatform_project.main.id
  name       = "orders-sync-failures"
  severity   = var.alert_severity
  condition = {
    metric    = "run_failed"
    operator  = "gt"
    threshold = 0
  }
  target = {
    connector_id = dataplatform_connector.orders.id
  }
  channel_ids = [dataplatform_notification_channel.oncall.id]

  # The API refuses to delete a connector an alert rule still targets: when the connector is
  # replaced (connector_type is immutable), replace the rule too, so it goes first.
  lifecycle {
    replace_triggered_by = [dataplatform_connector.orders.id]
  }
}

output "project_id" {
  value = dataplatform_project.main.id
}

output "connector_id" {
  value = dataplatform_connector.orders.id
}
