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

// The application's user may only read and write its own database (indexes included). Its
// password follows the Secret: after changing app-password, restart mongodb-0.
const appDb = db.getSiblingDB(env.MONGODB_APP_DATABASE);
const roles = [{ role: "readWrite", db: env.MONGODB_APP_DATABASE }];
if (appDb.getUser(env.MONGODB_APP_USER) === null) {
  appDb.createUser({ user: env.MONGODB_APP_USER, pwd: env.MONGODB_APP_PASSWORD, roles });
  print(`created user ${env.MONGODB_APP_USER}`);
} else {
  appDb.updateUser(env.MONGODB_APP_USER, { pwd: env.MONGODB_APP_PASSWORD, roles });
}
