// Run by init-replset.sh with mongosh on member 0, over localhost. Every step first checks
// whether it is done already.
const env = process.env;
const replicas = Number.parseInt(env.MONGODB_REPLICAS, 10);
const member = (i) =>
  `${env.MONGODB_STATEFULSET}-${i}.${env.MONGODB_SERVICE}.${env.POD_NAMESPACE}.svc:27017`;

function waitFor(what, done) {
  for (let second = 0; second < 600; second++) {
    try {
      if (done()) return;
    } catch (e) {
      // not yet
    }
    sleep(1000);
  }
  throw new Error(`gave up waiting for ${what}`);
}

if (!db.hello().setName) {
  const members = [];
  for (let i = 0; i < replicas; i++) {
    const uri = `mongodb://${member(i)}/?directConnection=true`;
    waitFor(`${member(i)} to answer`, () => {
      const client = new Mongo(uri);
      try {
        return client.getDB("admin").runCommand({ ping: 1 }).ok === 1;
      } finally {
        client.close();
      }
    });
    // Member 0 is preferred as primary, so the users below are created where this script runs.
    members.push({ _id: i, host: member(i), priority: i === 0 ? 2 : 1 });
  }
  rs.initiate({ _id: env.MONGODB_REPLICA_SET, members });
  print(`initiated replica set ${env.MONGODB_REPLICA_SET} with ${replicas} member(s)`);
}
waitFor("this member to become primary", () => db.hello().isWritablePrimary === true);

const admin = db.getSiblingDB("admin");
try {
  admin.createUser({ user: "root", pwd: env.MONGODB_ROOT_PASSWORD, roles: ["root"] });
  print("created user root");
} catch (e) {
  // Unauthorized: users exist already, so the localhost exception is closed.
  if (e.codeName !== "Unauthorized") throw e;
}
admin.auth("root", env.MONGODB_ROOT_PASSWORD);

// Each Interlock process connects as a user of its own, whose role allows only the actions that
// process takes on each collection of the application's database: service-roles.json, rendered
// from shared/store/access.py (docs/store-access.md). Roles follow that file and passwords the
// Secret on every run (updateRole and updateUser replace what was there): after changing
// either, restart mongodb-0.
const fs = require("fs");
const principals = JSON.parse(fs.readFileSync(env.MONGODB_ROLES_FILE, "utf8")).principals;
const appDb = db.getSiblingDB(env.MONGODB_APP_DATABASE);
// Development only: the gateway stores the well-known development key at start-up.
const development = env.MONGODB_DEVELOPMENT_GRANTS === "true";

function privilegesOf(principal) {
  const grants = { ...principal.privileges };
  if (development) {
    for (const [collection, actions] of Object.entries(principal.development_privileges)) {
      grants[collection] = [...new Set([...(grants[collection] || []), ...actions])].sort();
    }
  }
  return Object.entries(grants).map(([collection, actions]) => ({
    resource: { db: env.MONGODB_APP_DATABASE, collection },
    actions,
  }));
}

for (const [name, principal] of Object.entries(principals)) {
  const privileges = privilegesOf(principal);
  if (appDb.getRole(principal.role) === null) {
    appDb.createRole({ role: principal.role, privileges, roles: [] });
    print(`created role ${principal.role}`);
  } else {
    appDb.updateRole(principal.role, { privileges, roles: [] });
  }
  const pwd = env[`MONGODB_PASSWORD_${name.toUpperCase()}`];
  if (!pwd) throw new Error(`MONGODB_PASSWORD_${name.toUpperCase()} is not set`);
  const roles = [{ role: principal.role, db: env.MONGODB_APP_DATABASE }];
  if (appDb.getUser(principal.user) === null) {
    appDb.createUser({ user: principal.user, pwd, roles });
    print(`created user ${principal.user}`);
  } else {
    appDb.updateUser(principal.user, { pwd, roles });
  }
}
